"""What the backend-neutral store code needs of a database connection, and the one statement
every write to a thread starts with.

The shared code (``_base``, ``_runs``, ``_rows``) writes SQL that SQLite and PostgreSQL both
accept, with ``?`` (or numbered ``?N``) placeholders; a backend whose driver spells them
differently translates them in its connection wrapper (see ``_postgres``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from roboz.threads.errors import ThreadNotFoundError


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Conn(Protocol):
    """A connection inside a transaction the store opened (``sqlite3.Connection`` is one)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run ``sql`` once per parameter sequence (one round trip where the driver can)."""
        ...


def bump_revision(conn: Conn, thread_id: str, *tracked: str) -> int:
    """Raise the thread's revision by one and return it; ``tracked`` names parts
    (status, title, tasks, goals) whose own change marker moves with it."""
    sets = "".join(f", {name}_revision = revision + 1" for name in tracked)
    row = conn.execute(
        f"UPDATE threads SET revision = revision + 1{sets} WHERE thread_id = ? RETURNING revision",
        (thread_id,),
    ).fetchone()
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id!r}")
    return int(row[0])
