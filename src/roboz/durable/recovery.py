"""Worker heartbeats in PostgreSQL, and the recovery of a dead worker's runs by a live one.

DBOS recovers, at launch, only the workflows of its own executor id: a worker that dies and
never comes back under the same id leaves its runs PENDING for good. So every worker keeps a
row in ``<schema>.durable_workers``, holds a lock named by its executor id, and beats its row;
a live worker that finds another dead resumes that executor's PENDING workflows
(``DBOS.resume_workflow``) on their own queue, where any worker takes them from their last
recorded step.

How a death is noticed:

- **A process that dies** (killed, crashed, out of memory) on a live host: its kernel closes
  its socket, PostgreSQL ends its session at once, and with it the session's advisory lock.
  Every worker looks at its peers' locks a few times a second (:meth:`WorkerRegistry.watch`,
  one read of ``pg_locks``), and resumes a peer whose lock it saw held and then free for
  ``grace_s`` (1 s): about a second and a half from the death to the runs resuming. The grace
  covers a live worker whose session alone ended (an administrator's
  ``pg_terminate_backend``, a dropped connection): it notices at its next look and takes its
  lock back well within it.
- **A host that dies** (or is cut off) cannot close anything: its sessions end when the
  server's TCP keepalives give up on it (set on every session below: about 25 s), and its
  locks are then freed as above. A silent beat alone never suffices.
- **A worker that stopped on purpose** says so in its row and is taken over as soon as its
  lock is free, without a grace.

Three rules keep that safe:

- **One live process per executor id.** A worker holds a session-level advisory lock named by
  its executor id for as long as it lives; a second process with the same id is refused (two
  live processes sharing an id would re-run each other's steps). A worker is recovered only
  when its lock is free (a stale beat under a held lock is a hung worker, left alone).
- **One winner.** Recoverers take the dead worker's row ``FOR UPDATE SKIP LOCKED`` and its
  lock for the transaction, so two live workers never resume the same runs and a restarting
  worker waits for a recovery in progress rather than racing it.
- **No verdict without having watched.** A freed lock counts only if this worker saw it held
  during its own current session: a PostgreSQL restart ends every session and frees every
  lock, and a worker that reconnects first has seen none of the others' locks, so it waits
  for them to reconnect and take theirs. A silent beat counts only once a worker has itself
  been connected for a whole staleness period (its reconnect backoff is capped well below
  it). A worker that finds on reconnecting that it was recovered anyway (its row says so) is
  *fenced*: its runs belong to others now, and it stops.

Beats use the server's clock (``now()``), so hosts' clocks need not agree.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from roboz.durable._urls import describe_server as describe
from roboz.durable._urls import migrate_hint, redacted
from roboz.durable.errors import DurableError, DurableSchemaError

if TYPE_CHECKING:
    import psycopg

TABLE = "durable_workers"
_LOCK_PREFIX = "roboz-worker:"
_KEEPALIVES = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    # The same on the server's side of the socket: it is the server that must notice a dead
    # host, to end the session and free the host's executor locks.
    "options": "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3",
}

_DDL = """
CREATE TABLE IF NOT EXISTS "{schema}".durable_workers (
    executor_id TEXT COLLATE "C" PRIMARY KEY,
    queue TEXT NOT NULL,
    application_version TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    stopped_at TIMESTAMPTZ,
    recovered_at TIMESTAMPTZ,
    recovered_by TEXT,
    recovered_runs INTEGER
);
CREATE INDEX IF NOT EXISTS durable_workers_by_queue
    ON "{schema}".durable_workers (queue, heartbeat_at)
"""


class ExecutorIdInUse(DurableError):
    """Another live process holds this executor id."""


class Fenced(DurableError):
    """Another worker recovered this worker's runs while it was cut off; it must stop."""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise DurableError("durable workers need psycopg: pip install 'roboz[durable]'") from None
    return psycopg


def _check_schema_name(schema: str) -> None:
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise ValueError(f"schema must be a plain lower-case SQL name, not {schema!r}")


def lock_key(executor_id: str) -> int:
    """The advisory lock key of an executor id (signed 64 bits; a collision only serializes)."""
    digest = hashlib.blake2b((_LOCK_PREFIX + executor_id).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection with keepalives both ways; one line naming the server if not."""
    pg = _psycopg()
    where = describe(url)
    try:
        raw: psycopg.Connection[Any] = pg.connect(url, autocommit=True, **_KEEPALIVES)
    except pg.Error as error:
        message = _first_line(error).replace(url, redacted(url))
        raise DurableSchemaError(
            f"cannot connect to {where}: {message}; check the URL and that the server is running"
        ) from None
    return raw


def migrate_workers(url: str, *, schema: str = "roboz") -> str:
    """Create the heartbeat table at ``url`` (idempotent); returns one line saying so."""
    _check_schema_name(schema)
    pg = _psycopg()
    where = describe(url)
    with connect(url) as raw:
        try:
            raw.execute(cast(Any, f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            for statement in _DDL.format(schema=schema).split(";"):
                raw.execute(cast(Any, statement))
        except pg.Error as error:
            raise DurableSchemaError(f"{where}: {_first_line(error)}") from None
    return f"{where}, schema {schema}: worker heartbeat table ready"


@dataclass(frozen=True)
class Recovered:
    """One dead worker whose runs a live worker resumed."""

    executor_id: str
    host: str
    pid: int
    silent_s: float
    """How long its beat had been silent (or since it stopped)."""
    workflow_ids: tuple[str, ...]
    why: str = "silent"
    """``"session ended"`` (its lock was freed), ``"stopped"`` (it said so) or ``"silent"``
    (its beat went stale)."""


ResumePending = Callable[[str], list[str]]
"""Resumes the PENDING workflows of an executor id; returns their ids."""


class WorkerRegistry:
    """This worker's row and lock, on one dedicated connection, and the recovery of others.

    ``stale_after_s`` is how long a beat may be silent before its worker counts as dead
    (several ``interval_s``); every worker on a queue should use the same values. ``grace_s``
    is how long a peer's lock, seen held, must then stay free before the peer counts as dead
    (:meth:`watch`, which a worker calls more often than it beats).
    """

    def __init__(
        self,
        url: str,
        *,
        executor_id: str,
        queue: str,
        application_version: str,
        host: str,
        pid: int,
        schema: str = "roboz",
        interval_s: float = 5.0,
        stale_after_s: float = 30.0,
        claim_timeout_s: float = 5.0,
        grace_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_schema_name(schema)
        if not 0 < interval_s < stale_after_s:
            raise ValueError("the heartbeat interval must be positive and below stale_after_s")
        if grace_s < 0:
            raise ValueError("grace_s must not be negative")
        self._pg = _psycopg()
        self.url = url
        self.where = describe(url)
        self.executor_id = executor_id
        self.queue = queue
        self.application_version = application_version
        self.host = host
        self.pid = pid
        self.schema = schema
        self.interval_s = interval_s
        self.stale_after_s = stale_after_s
        self.claim_timeout_s = claim_timeout_s
        self.grace_s = grace_s
        self._clock = clock
        self._conn: psycopg.Connection[Any] | None = None
        self._started_at: object = None  # the server's timestamp of this registration
        self._connected_since = 0.0
        self._table = f'"{schema}".{TABLE}'
        # What watch() saw of its peers' locks during this session (reset on reconnecting).
        self._seen_held: set[str] = set()
        self._free_since: dict[str, float] = {}
        self._due: set[str] = set()

    # -- this worker --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.closed and not conn.broken

    def _sql(self, text: str) -> Any:
        # Built from literals and the checked schema name; psycopg wants LiteralString.
        return cast(Any, text.replace("{table}", self._table))

    def _hint(self) -> str:
        hint = migrate_hint(self.url)
        return hint if self.schema == "roboz" else f"{hint} --schema {self.schema}"

    def _open(self) -> psycopg.Connection[Any]:
        """Connect and take this executor id's lock (waiting up to ``claim_timeout_s``, which
        covers a recovery of this id in progress); refuse when another process holds it."""
        pg = self._pg
        raw = connect(self.url)
        try:
            table = raw.execute("SELECT to_regclass(%s)", (f'"{self.schema}".{TABLE}',)).fetchone()
            if table is None or table[0] is None:
                raise DurableSchemaError(
                    f"{self.where} has no durable worker table in schema {self.schema}: "
                    f"run {self._hint()}"
                )
            raw.execute(
                "SELECT set_config('lock_timeout', %s, false)",
                (f"{int(self.claim_timeout_s * 1000)}ms",),
            )
            try:
                raw.execute("SELECT pg_advisory_lock(%s)", (lock_key(self.executor_id),))
            except pg.errors.LockNotAvailable:
                holder = raw.execute(
                    self._sql("SELECT host, pid FROM {table} WHERE executor_id = %s"),
                    (self.executor_id,),
                ).fetchone()
                who = f" (host {holder[0]}, pid {holder[1]})" if holder else ""
                raise ExecutorIdInUse(
                    f"executor id {self.executor_id!r} is held by another live worker{who}; "
                    "give each worker its own --name or --executor-id"
                ) from None
            raw.execute("SELECT set_config('lock_timeout', '0', false)")
            if raw.info.server_version >= 140000:
                # A server-wide idle_session_timeout would end this session between beats,
                # and free the lock that says this worker lives.
                raw.execute("SELECT set_config('idle_session_timeout', '0', false)")
        except BaseException:
            raw.close()
            raise
        self._connected_since = self._clock()
        self._seen_held.clear()
        self._free_since.clear()
        self._due.clear()
        return raw

    def register(self) -> None:
        """Claim the executor id and (re)write this worker's row as freshly started."""
        raw = self._open()
        try:
            row = raw.execute(
                self._sql(
                    "INSERT INTO {table} (executor_id, queue, application_version, host, pid,"
                    " started_at, heartbeat_at) VALUES (%s, %s, %s, %s, %s, now(), now())"
                    " ON CONFLICT (executor_id) DO UPDATE SET queue = excluded.queue,"
                    " application_version = excluded.application_version,"
                    " host = excluded.host, pid = excluded.pid, started_at = now(),"
                    " heartbeat_at = now(), stopped_at = NULL, recovered_at = NULL,"
                    " recovered_by = NULL, recovered_runs = NULL"
                    " RETURNING started_at"
                ),
                (self.executor_id, self.queue, self.application_version, self.host, self.pid),
            ).fetchone()
        except BaseException:
            raw.close()
            raise
        assert row is not None
        self._started_at = row[0]
        self._conn = raw

    def beat(self) -> None:
        """Refresh this worker's beat, reconnecting (and re-taking the lock) if the session
        was lost. Raises :class:`Fenced` if others recovered this worker meanwhile, and
        psycopg's ``OperationalError`` (or :class:`DurableSchemaError`) while PostgreSQL is
        unreachable."""
        if not self.connected:
            self.close()
            self._conn = self._open()
        conn = self._conn
        assert conn is not None
        try:
            row = conn.execute(
                self._sql(
                    "UPDATE {table} SET heartbeat_at = now() WHERE executor_id = %s"
                    " AND started_at = %s AND recovered_at IS NULL RETURNING 1"
                ),
                (self.executor_id, self._started_at),
            ).fetchone()
        except self._pg.OperationalError:
            self.close()
            raise
        if row is None:
            found = conn.execute(
                self._sql("SELECT recovered_by FROM {table} WHERE executor_id = %s"),
                (self.executor_id,),
            ).fetchone()
            by = f" by {found[0]}" if found and found[0] else ""
            raise Fenced(
                f"worker {self.executor_id!r} was declared dead and its runs recovered{by} "
                "while it was cut off from PostgreSQL; it stops so as not to run them twice"
            )

    def mark_stopped(self) -> None:
        """Say this worker left on purpose: others resume what it leaves PENDING at once."""
        conn = self._conn
        if conn is None or not self.connected:
            return
        # If unreachable, its beat goes stale and others recover it the slow way.
        with contextlib.suppress(self._pg.Error):
            conn.execute(
                self._sql(
                    "UPDATE {table} SET stopped_at = now() WHERE executor_id = %s"
                    " AND started_at = %s"
                ),
                (self.executor_id, self._started_at),
            )

    def close(self) -> None:
        """Close the session, which frees the executor id's lock."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(self._pg.Error):
                conn.close()

    # -- the others ---------------------------------------------------------------------------

    def may_judge(self) -> bool:
        """Whether this worker has been connected long enough to call a silent worker dead."""
        return self.connected and self._clock() - self._connected_since >= self.stale_after_s

    def watch(self) -> bool:
        """Look at the locks of this queue's other workers; returns whether one is due for
        :meth:`recover_dead`: it said it stopped and its lock is free, or its lock, seen held
        during this session, has been free for ``grace_s`` (its session ended). Two reads,
        no writes; meant to run several times a second."""
        conn = self._conn
        if conn is None or not self.connected:
            return False
        try:
            peers = conn.execute(
                self._sql(
                    "SELECT executor_id, stopped_at IS NOT NULL FROM {table}"
                    " WHERE queue = %s AND executor_id <> %s AND recovered_at IS NULL"
                ),
                (self.queue, self.executor_id),
            ).fetchall()
            # A bigint advisory key shows as its high half in classid, its low half in objid.
            locks = conn.execute(
                "SELECT classid::int8, objid::int8 FROM pg_locks WHERE locktype = 'advisory'"
                " AND objsubid = 1 AND granted AND database ="
                " (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchall()
        except self._pg.OperationalError:
            self.close()
            raise
        held = {_signed(high << 32 | low) for high, low in locks}
        now = self._clock()
        due = False
        for executor_id in set(self._free_since) - {p[0] for p in peers}:
            del self._free_since[executor_id]  # recovered by another, or gone
        for executor_id, stopped in peers:
            if lock_key(executor_id) in held:
                self._seen_held.add(executor_id)
                self._free_since.pop(executor_id, None)
                self._due.discard(executor_id)
            elif stopped:
                due = True
            elif executor_id in self._seen_held:
                freed = self._free_since.setdefault(executor_id, now)
                if now - freed >= self.grace_s:
                    self._due.add(executor_id)
                    due = True
        return due

    def recover_dead(self, resume_pending: ResumePending) -> list[Recovered]:
        """Resume the PENDING runs of every dead worker of this queue (one winner per dead
        worker); returns those recovered. A worker that said it stopped is taken over at
        once; one whose session ended once :meth:`watch` says so; a silent one only once
        this worker :meth:`may_judge`. None whose lock is held."""
        conn = self._conn
        if conn is None or not self.connected:
            return []
        judge = self.may_judge()
        ended = sorted(self._due)
        recovered: list[Recovered] = []
        with conn.transaction():
            rows = conn.execute(
                self._sql(
                    "SELECT executor_id, host, pid,"
                    " EXTRACT(EPOCH FROM now() - COALESCE(stopped_at, heartbeat_at)),"
                    " stopped_at IS NOT NULL"
                    " FROM {table} WHERE queue = %s AND executor_id <> %s"
                    " AND recovered_at IS NULL"
                    " AND (stopped_at IS NOT NULL OR executor_id = ANY(%s)"
                    "      OR (%s AND heartbeat_at < now() - make_interval(secs => %s)))"
                    " ORDER BY heartbeat_at FOR UPDATE SKIP LOCKED"
                ),
                (self.queue, self.executor_id, ended, judge, self.stale_after_s),
            ).fetchall()
            for executor_id, host, pid, silent, stopped in rows:
                free = conn.execute(
                    "SELECT pg_try_advisory_xact_lock(%s)", (lock_key(executor_id),)
                ).fetchone()
                if not free or not free[0]:
                    continue  # its process still holds its session: hung, not dead
                workflow_ids = resume_pending(executor_id)
                conn.execute(
                    self._sql(
                        "UPDATE {table} SET recovered_at = now(), recovered_by = %s,"
                        " recovered_runs = %s WHERE executor_id = %s"
                    ),
                    (self.executor_id, len(workflow_ids), executor_id),
                )
                why = (
                    "stopped" if stopped else "session ended" if executor_id in ended else "silent"
                )
                recovered.append(
                    Recovered(executor_id, host, pid, float(silent), tuple(workflow_ids), why)
                )
        self._due.difference_update(ended)
        return recovered


def _signed(key: int) -> int:
    """A 64-bit key read back unsigned, as the signed value ``lock_key`` gave."""
    return key - (1 << 64) if key >= 1 << 63 else key


__all__ = [
    "ExecutorIdInUse",
    "Fenced",
    "Recovered",
    "WorkerRegistry",
    "lock_key",
    "migrate_workers",
]
