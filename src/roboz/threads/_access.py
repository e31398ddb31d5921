"""The thread store's SQL for what the thread API adds: listing and searching what a caller
may see (with their pins), pins, ratings and deleting a thread.

Kept apart from the writers of messages (``_base``, ``_runs``): these statements touch the
thread row only to read it (and delete it whole), and the per-person tables (pins, ratings)
are their own. The SQL is the shared, portable kind (see ``_sql``); the two places where the
backends' SQL differs (reading the visibility out of the metadata JSON, and a
case-insensitive LIKE) are class attributes a backend overrides.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from roboz.threads import writer
from roboz.threads._rows import current, record_from_row, thread_columns, thread_row
from roboz.threads.content import storable
from roboz.threads.errors import MessageNotFoundError, ThreadBusyError, ThreadNotFoundError
from roboz.threads.identity import Caller
from roboz.threads.record import AgentThreadRecord, utc_now

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from roboz.threads._sql import Conn
    from roboz.threads.access import CallerThreads

_QUALIFIED = thread_columns("t")


@dataclass(frozen=True)
class ThreadPage:
    """One page of a listing or a search: the threads (metadata and the caller's
    ``pinned_at``, no messages) and the token of the next page (None on the last)."""

    threads: list[AgentThreadRecord]
    next_page_token: str | None


def _encode_page(created: str, thread_id: str) -> str:
    raw = json.dumps([created, thread_id]).encode()
    return "pg1." + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_page(token: str) -> tuple[str, str]:
    if not token.startswith("pg1."):
        raise ValueError(f"not a page token: {token!r}")
    body = token[4:]
    try:
        value = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError(f"malformed page token: {token!r}") from None
    if (
        not isinstance(value, list)
        or len(value) != 2  # pyright: ignore[reportUnknownArgumentType]
        or not all(isinstance(part, str) for part in value)  # pyright: ignore[reportUnknownVariableType]
    ):
        raise ValueError(f"malformed page token: {token!r}")
    return str(value[0]), str(value[1])  # pyright: ignore[reportUnknownArgumentType]


def _like_pattern(text: str) -> str:
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


class AccessMixin:
    """Visible listings, search, pins, ratings and deletion (mixed into the stores)."""

    _visibility_sql = "json_extract(t.meta, '$.visibility')"
    """The visibility of thread row ``t`` as SQL text (SQLite's JSON functions)."""
    _ilike = "LIKE"
    """A case-insensitive LIKE (SQLite's LIKE is, for ASCII)."""

    if TYPE_CHECKING:
        _where: str
        _read: Callable[[], AbstractContextManager[Conn]]
        _write: Callable[[str], AbstractContextManager[Conn]]

        def _owner_alive(
            self, conn: Conn, owner: str, pid: int | None, start: str | None
        ) -> bool: ...

    def for_caller(self, caller: Caller) -> CallerThreads:
        """This store as ``caller`` sees it: the thread API's rules on every call."""
        from roboz.threads.access import AccessStore, CallerThreads

        return CallerThreads(cast("AccessStore", self), caller)

    def thread_state(self, thread_id: str) -> tuple[int, bool] | None:
        """The thread's revision and whether a run holds it (None: no such thread), in one
        row read: enough to tell whether a copy of the thread read earlier is still current
        (``roboz serve``'s response cache)."""
        with getattr(self, "_peek", self._read)() as conn:
            row = conn.execute(
                f"SELECT {current('revision')}, lease_owner IS NOT NULL FROM threads "
                "WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
        return None if row is None else (int(row[0]), bool(row[1]))

    def change_stamp(self) -> Hashable | None:
        """A value equal while nothing is committed to the store, or None when the backend
        cannot tell without a round trip (PostgreSQL: every check reads its rows)."""
        return None

    def thread_metadata(self, thread_id: str) -> AgentThreadRecord:
        """The thread's record without messages, tasks or goals (one row read)."""
        with self._read() as conn:
            row = thread_row(conn, thread_id)
        return record_from_row(row, with_tasks_and_goals=False)

    def visible_threads(
        self,
        caller: Caller,
        *,
        limit: int = 50,
        page_token: str | None = None,
        query: str | None = None,
        pinned_only: bool = False,
    ) -> ThreadPage:
        """The threads ``caller`` may read, newest first, each with the caller's pin;
        ``query`` keeps those whose title or message text contains it (case-insensitive for
        ASCII letters). ``page_token`` continues a previous page; a bad one is ValueError."""
        if not 1 <= limit <= 1000:
            raise ValueError(f"limit must be 1-1000, not {limit}")
        clauses = ["t.org_id = ?"]
        params: list[Any] = [caller.user_id, caller.org_id]
        if not caller.admin:
            clauses.append(f"(t.created_by = ? OR {self._visibility_sql} = 'org')")
            params.append(caller.user_id)
        if page_token is not None:
            created, thread_id = _decode_page(page_token)
            clauses.append("(t.created < ? OR (t.created = ? AND t.thread_id < ?))")
            params += [created, created, thread_id]
        if pinned_only:
            clauses.append("p.pinned_at IS NOT NULL")
        if query is not None:
            storable(query, "query")
            in_text = _like_pattern(json.dumps(query, ensure_ascii=False)[1:-1])
            clauses.append(
                f"(t.title {self._ilike} ? ESCAPE '!' OR EXISTS (SELECT 1 FROM messages m "
                f"WHERE m.thread_id = t.thread_id AND m.content {self._ilike} ? ESCAPE '!'))"
            )
            params += [_like_pattern(query), in_text]
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_QUALIFIED}, p.pinned_at FROM threads t LEFT JOIN pins p "
                "ON p.thread_id = t.thread_id AND p.user_id = ? "
                f"WHERE {' AND '.join(clauses)} "
                "ORDER BY t.created DESC, t.thread_id DESC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        threads: list[AgentThreadRecord] = []
        for row in rows[:limit]:
            record = record_from_row(row[:-1], with_tasks_and_goals=False)
            if row[-1] is not None:
                record.pinned_at = datetime.fromisoformat(row[-1])
            threads.append(record)
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        token = _encode_page(last[3], last[0]) if last is not None else None
        return ThreadPage(threads, token)

    def set_pinned(self, thread_id: str, user_id: str, pinned: bool) -> datetime | None:
        """Pin (or unpin) the thread for ``user_id``; returns when it was pinned (the first
        pin's time when pinned again), None once unpinned."""
        with self._write(thread_id) as conn:
            thread_row(conn, thread_id)
            if not pinned:
                conn.execute(
                    "DELETE FROM pins WHERE user_id = ? AND thread_id = ?", (user_id, thread_id)
                )
                return None
            conn.execute(
                "INSERT INTO pins (user_id, thread_id, pinned_at) VALUES (?, ?, ?) "
                "ON CONFLICT (user_id, thread_id) DO NOTHING",
                (user_id, thread_id, utc_now().isoformat()),
            )
            (when,) = conn.execute(
                "SELECT pinned_at FROM pins WHERE user_id = ? AND thread_id = ?",
                (user_id, thread_id),
            ).fetchone()
        return datetime.fromisoformat(when)

    def rate_thread(
        self,
        thread_id: str,
        user_id: str,
        rating: str,
        *,
        sequence_num: int | None = None,
        comment: str | None = None,
    ) -> datetime:
        """Record ``user_id``'s rating of the thread (or of its message ``sequence_num``),
        replacing their earlier rating of the same; returns when it was recorded."""
        storable(rating, "rating")
        if comment is not None:
            storable(comment, "comment")
        when = utc_now()
        with self._write(thread_id) as conn:
            (count,) = conn.execute(
                f"SELECT {current('message_count')} FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone() or (None,)
            if count is None:
                raise ThreadNotFoundError(f"no thread {thread_id!r}")
            if sequence_num is not None and not 0 <= sequence_num < count:
                raise MessageNotFoundError(f"thread {thread_id!r} has no message {sequence_num}")
            conn.execute(
                "INSERT INTO ratings (thread_id, user_id, seq, rating, comment, created) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, user_id, seq) DO UPDATE SET "
                "rating = excluded.rating, comment = excluded.comment, created = excluded.created",
                (
                    thread_id,
                    user_id,
                    -1 if sequence_num is None else sequence_num,
                    rating,
                    comment,
                    when.isoformat(),
                ),
            )
        return when

    def ratings(self, thread_id: str) -> list[tuple[str, int | None, str, str | None]]:
        """Every rating of the thread: (user id, message or None for the thread, rating,
        comment), by user then message."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT user_id, seq, rating, comment FROM ratings WHERE thread_id = ? "
                "ORDER BY user_id, seq",
                (thread_id,),
            ).fetchall()
        return [(r[0], None if r[1] < 0 else int(r[1]), r[2], r[3]) for r in rows]

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread with its messages, pins and ratings. A live run holding it
        refuses (ThreadBusyError): cancel the run first."""
        with self._write(thread_id) as conn:
            row = conn.execute(
                "SELECT lease_owner, lease_pid, lease_start FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                raise ThreadNotFoundError(f"no thread {thread_id!r}")
            if row[0] is not None and self._owner_alive(conn, *row):
                raise ThreadBusyError(
                    f"thread {thread_id!r} is being run; cancel its turn before deleting it"
                )
            writer.delete_thread(conn, thread_id)

    def pinned_at(self, user_id: str, thread_ids: Sequence[str]) -> dict[str, datetime]:
        """When ``user_id`` pinned each of ``thread_ids`` (only the pinned ones appear)."""
        if not thread_ids:
            return {}
        marks = ", ".join("?" * len(thread_ids))
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT thread_id, pinned_at FROM pins WHERE user_id = ? "
                f"AND thread_id IN ({marks})",
                (user_id, *thread_ids),
            ).fetchall()
        return {r[0]: datetime.fromisoformat(r[1]) for r in rows}
