"""What the backend-neutral store code needs of a database connection.

The shared code (``_base``, ``_runs``, ``_rows``) writes SQL that SQLite and PostgreSQL both
accept, with ``?`` (or numbered ``?N``) placeholders; a backend whose driver spells them
differently translates them in its connection wrapper (see ``_postgres``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (an UPDATE's matches)."""
        ...


class Conn(Protocol):
    """A connection inside a transaction the store opened (``sqlite3.Connection`` is one)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run ``sql`` once per parameter sequence (one round trip where the driver can)."""
        ...
