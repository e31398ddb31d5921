"""The Librarian's ledger in the thread store: runs by agent, snapshot coverage, memory versions.

Coverage lives in the store, beside the messages it points at, so "what is new since the last
snapshot" is one indexed read of the rows after a sequence number, and a sweep with nothing new
is one query over the watched agents' threads (O(threads), no message is read). A snapshot or
memory version that retention removed stays as a tombstone row: its coverage is still known,
so it is never made again.

The SQL is the shared, portable kind (see ``_sql``), so SQLite and PostgreSQL keep the ledger
with this one copy of it. A write locks what its check-then-write guards: a snapshot locks its
thread (coverage is per thread), a memory version or a retention pass its project.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from roboz.threads import writer
from roboz.threads._rows import current
from roboz.threads.record import utc_now

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from roboz.threads._sql import Conn


class RunInfo(NamedTuple):
    """One persisted run (thread) of an agent, as the Librarian sees it."""

    thread_id: str
    agent: str
    """The agent that created the thread (``created_by``)."""
    created: str
    message_count: int
    covered_through: int
    """Sequence number of the last message a snapshot covers (-1: none yet)."""
    lease_pid: int | None
    """The process running it now, None when no run holds it (ended, failed, cancelled or
    interrupted)."""

    @property
    def active(self) -> bool:
        return self.lease_pid is not None

    @property
    def has_new(self) -> bool:
        return self.message_count - 1 > self.covered_through


class TailRow(NamedTuple):
    """A message row after a sequence number: RoboZ ``extras`` and the stored blocks."""

    seq: int
    role: str
    status: str
    content: str
    extras: str | None


class SnapshotRecord(NamedTuple):
    snapshot_id: str
    project: str
    thread_id: str
    first_seq: int
    last_seq: int
    created: str
    consolidated_in: int | None
    """The memory version that took this snapshot in; None while it is pending."""
    deleted: bool


class MemoryVersion(NamedTuple):
    project: str
    version: int
    created: str
    digest: str
    """sha256 of the document as written: a file that no longer matches it is corrupt."""
    snapshot_ids: tuple[str, ...]
    deleted: bool


_SNAPSHOT_COLUMNS = (
    "snapshot_id, project, thread_id, first_seq, last_seq, created, consolidated_in, deleted"
)


def _project_lock(project: str) -> str:
    # The write-lock key of a project's ledger, kept apart from thread ids (which are keys too).
    return f"project\0{project}"


def _snapshot(row: Sequence[object]) -> SnapshotRecord:
    values = list(row)
    values[7] = bool(values[7])
    return SnapshotRecord._make(values)


class LedgerMixin:
    """The Librarian's half of a thread store (mixed into each backend's store)."""

    if TYPE_CHECKING:
        _read: Callable[[], AbstractContextManager[Conn]]
        _write: Callable[[str], AbstractContextManager[Conn]]

        def _owner_alive(
            self, conn: Conn, owner: str, pid: int | None, start: str | None
        ) -> bool: ...

        def recover_interrupted(self, thread_id: str) -> None: ...

    def list_runs(self, agents: Sequence[str]) -> list[RunInfo]:
        """Every thread created by one of ``agents``, oldest first, with how far snapshots
        cover it and whether a run holds it now. A run whose process died is marked
        interrupted first, so it reads as ended."""
        if not agents:
            return []
        marks = ", ".join("?" * len(agents))
        query = (
            f"SELECT t.thread_id, t.created_by, t.created, {current('message_count', 't')}, "
            "coalesce((SELECT max(s.last_seq) FROM snapshots s WHERE s.thread_id = t.thread_id),"
            " -1), t.lease_owner, t.lease_pid, t.lease_start "
            f"FROM threads t WHERE t.created_by IN ({marks}) ORDER BY t.created, t.thread_id"
        )
        with self._read() as conn:
            rows = conn.execute(query, tuple(agents)).fetchall()
            # Asked inside the read: PostgreSQL tells another host's live holder by its lock.
            alive = [row[5] is not None and self._owner_alive(conn, *row[5:]) for row in rows]
        runs: list[RunInfo] = []
        for row, held in zip(rows, alive, strict=True):
            thread_id, agent, created, count, covered, owner, pid, _ = row
            if owner is not None and not held:
                self.recover_interrupted(thread_id)
                with self._read() as conn:
                    (count,) = conn.execute(
                        f"SELECT {current('message_count')} FROM threads WHERE thread_id = ?",
                        (thread_id,),
                    ).fetchone()
                owner = pid = None
            runs.append(RunInfo(thread_id, agent, created, count, covered, pid if owner else None))
        return runs

    def rows_after(self, thread_id: str, after_seq: int) -> list[TailRow]:
        """The finished message rows of ``thread_id`` after ``after_seq``, in order; stops
        before a reply still being generated (it is new content only once it is final)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT seq, role, status, content, extras FROM messages "
                "WHERE thread_id = ? AND seq > ? ORDER BY seq",
                (thread_id, after_seq),
            ).fetchall()
        tail: list[TailRow] = []
        for row in rows:
            if row[2] == "generating":
                break
            tail.append(TailRow._make(row))
        return tail

    def record_snapshot(
        self, snapshot_id: str, *, project: str, thread_id: str, first_seq: int, last_seq: int
    ) -> bool:
        """Record that a snapshot covers messages first_seq..last_seq of ``thread_id``.

        False (and nothing written) when a snapshot already covers any of those messages:
        two sweeps never cover the same messages twice."""
        with self._write(thread_id) as conn:
            (covered,) = conn.execute(
                "SELECT max(last_seq) FROM snapshots WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if covered is not None and covered >= first_seq:
                return False
            conn.execute(
                f"INSERT INTO snapshots ({_SNAPSHOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL, 0)",
                (snapshot_id, project, thread_id, first_seq, last_seq, utc_now().isoformat()),
            )
        return True

    def list_snapshots(self, project: str, *, pending: bool = False) -> list[SnapshotRecord]:
        """The project's snapshot records (tombstones included unless ``pending``), oldest
        first; ``pending``: only live ones no memory version has taken in yet."""
        where = "project = ?" + (" AND consolidated_in IS NULL AND deleted = 0" if pending else "")
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots WHERE {where} "
                "ORDER BY created, snapshot_id",
                (project,),
            ).fetchall()
        return [_snapshot(row) for row in rows]

    def record_memory_version(
        self, project: str, base_version: int, digest: str, snapshot_ids: Sequence[str]
    ) -> int | None:
        """Record memory version ``base_version + 1`` and mark ``snapshot_ids`` taken in, in
        one transaction. None (nothing written) when a newer version than ``base_version``
        exists already: the consolidation was superseded and is discarded."""
        with self._write(_project_lock(project)) as conn:
            (latest,) = conn.execute(
                "SELECT coalesce(max(version), 0) FROM memory_versions WHERE project = ?",
                (project,),
            ).fetchone()
            if latest != base_version:
                return None
            version = base_version + 1
            conn.execute(
                "INSERT INTO memory_versions (project, version, created, digest, snapshot_ids, "
                "deleted) VALUES (?, ?, ?, ?, ?, 0)",
                (project, version, utc_now().isoformat(), digest, json.dumps(list(snapshot_ids))),
            )
            conn.executemany(
                "UPDATE snapshots SET consolidated_in = ? WHERE snapshot_id = ? AND project = ?",
                [(version, snapshot_id, project) for snapshot_id in snapshot_ids],
            )
        return version

    def list_memory_versions(self, project: str) -> list[MemoryVersion]:
        """Every memory version of ``project`` (tombstones included), oldest first."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT project, version, created, digest, snapshot_ids, deleted "
                "FROM memory_versions WHERE project = ? ORDER BY version",
                (project,),
            ).fetchall()
        return [
            MemoryVersion(p, v, c, d, tuple(json.loads(ids)), bool(gone))
            for p, v, c, d, ids, gone in rows
        ]

    def forget_artifacts(
        self,
        project: str,
        *,
        snapshot_ids: Sequence[str] = (),
        memory_versions: Sequence[int] = (),
    ) -> None:
        """Tombstone snapshots and memory versions whose files retention removed. Pending
        snapshots and the latest memory version are refused (ValueError, nothing written)."""
        with self._write(_project_lock(project)) as conn:
            for snapshot_id in snapshot_ids:
                row = conn.execute(
                    "SELECT consolidated_in FROM snapshots WHERE snapshot_id = ? AND project = ?",
                    (snapshot_id, project),
                ).fetchone()
                if row is not None and row[0] is None:
                    raise ValueError(f"snapshot {snapshot_id!r} is not consolidated yet")
            (latest,) = conn.execute(
                "SELECT max(version) FROM memory_versions WHERE project = ?", (project,)
            ).fetchone()
            if latest in memory_versions:
                raise ValueError(f"memory version {latest} of {project!r} is the latest")
            conn.executemany(
                "UPDATE snapshots SET deleted = 1 WHERE snapshot_id = ? AND project = ?",
                [(snapshot_id, project) for snapshot_id in snapshot_ids],
            )
            conn.executemany(
                "UPDATE memory_versions SET deleted = 1 WHERE project = ? AND version = ?",
                [(project, version) for version in memory_versions],
            )

    def delete_run(self, thread_id: str) -> bool:
        """Delete an ended run's thread with its messages; False when it is gone already or
        a live run holds it (an active run is never deleted). Its snapshot records stay."""
        with self._write(thread_id) as conn:
            row = conn.execute(
                "SELECT lease_owner, lease_pid, lease_start FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                return False
            if row[0] is not None and self._owner_alive(conn, *row):
                return False
            writer.delete_thread(conn, thread_id)
        return True
