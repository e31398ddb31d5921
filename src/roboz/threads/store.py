"""A thread store on SQLite (stdlib ``sqlite3``, WAL mode, versioned schema).

Each Python thread gets its own connection; every write runs in ``BEGIN IMMEDIATE`` so
writers from several threads or processes serialize instead of losing messages. What the
store does with its rows is shared with the PostgreSQL store (``_base``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from roboz.threads._access import AccessMixin
from roboz.threads._base import ThreadStoreBase, extension
from roboz.threads._ledger import LedgerMixin
from roboz.threads._rows import TAIL_AND_CHANGED_SQL
from roboz.threads._schema import check_schema_readable, ensure_schema
from roboz.threads._sqlite import Connections
from roboz.threads._tokens import TokenMixin
from roboz.threads.errors import SchemaVersionError, ThreadStoreError

__all__ = ["SQLiteThreadStore", "extension"]


class SQLiteThreadStore(ThreadStoreBase, LedgerMixin, AccessMixin, TokenMixin):
    """Threads, messages, tasks, goals and compressed variants in one SQLite file."""

    # A commit writes every page it changed to the WAL: a run's append leaves the thread row
    # as it is, so each message costs the pages of its own row alone.
    _row_only_appends = True
    # Nor does it add an entry to an index of every message by revision (schema version 6).
    _changed_messages_sql = TAIL_AND_CHANGED_SQL

    def __init__(
        self, path: str | Path, *, busy_timeout_s: float = 30.0, read_only: bool = False
    ) -> None:
        if str(path) == ":memory:" or str(path).startswith("file:"):
            raise ValueError("SQLiteThreadStore needs a file path (connections are per thread)")
        self.path = Path(path)
        self.read_only = read_only
        """A read-only store reads threads (e.g. for a user interface) and refuses runs."""
        if read_only and not self.path.exists():
            raise ThreadStoreError(f"{self.path}: no such thread store to open read-only")
        self._connections = Connections(self.path, busy_timeout_s, read_only=read_only)
        self._write = self._connections.write
        self._read = self._connections.read
        self._peek = self._connections.peek
        self._where = str(self.path)
        self._duplicate_key = (sqlite3.IntegrityError,)
        try:
            if read_only:
                with self._read() as conn:
                    check_schema_readable(conn, self.path)
            else:
                with self._write() as conn:
                    ensure_schema(conn, self.path)
        except sqlite3.DatabaseError as error:
            self._connections.close()
            raise ThreadStoreError(
                f"{self.path}: cannot use it as a thread store: {error}"
            ) from None
        except SchemaVersionError:
            self._connections.close()
            raise

    def change_stamp(self) -> tuple[int, int] | None:
        """A value that stays equal while nothing is committed to the store (by this
        process or another); compare stamps taken on one Python thread. Taken before a
        read, an equal stamp later says the read's answer still holds (``roboz serve``'s
        response cache checks tokens and threads so without reading their rows)."""
        return self._connections.change_stamp()

    def close(self) -> None:
        """Close every connection this store opened."""
        self._connections.close()

    def __enter__(self) -> SQLiteThreadStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
