"""SQLite connections of the thread store: one per Python thread, explicit transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from roboz.threads.errors import ThreadStoreError


class Connections:
    """Hands each Python thread its own connection to ``path`` (WAL, foreign keys on).

    Writes run in ``BEGIN IMMEDIATE`` so concurrent writers queue on SQLite's lock (up to
    ``busy_timeout_s``) instead of failing halfway; reads run in one transaction so every
    query inside sees the same snapshot.
    """

    def __init__(self, path: Path, busy_timeout_s: float, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.writes = 0
        """Counts up at the start and at the end of every write transaction of these
        connections (``change_stamp``)."""

    def get(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                f"file:{self.path}?mode=ro" if self.read_only else self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,  # only close() touches it from another thread
                uri=self.read_only,
            )
            if not self.read_only:
                conn.execute("PRAGMA journal_mode = WAL")
                # A checkpoint fsyncs the WAL and the database (~4 ms each here) and a run
                # commits a few pages per message, so at SQLite's default (1,000 pages) a
                # checkpoint cost more than the commits between them. Waiting for ~40 MiB of
                # WAL copies the pages a run rewrites (its thread row, index leaves) once for
                # many commits instead; commits themselves stay as durable as before.
                conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def write(self, thread_id: str = "") -> _Write:
        # One lock for the whole file: writers of different threads queue too.
        del thread_id
        return _Write(self)

    @contextmanager
    def read(self) -> Generator[sqlite3.Connection, None, None]:
        with self._naming_the_file():
            conn = self.get()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def change_stamp(self) -> tuple[int, int]:
        """Equal from one call to the next while nothing was committed to the file.

        SQLite's ``data_version`` of this thread's connection changes when any other
        connection (of this process or another) commits; commits on this connection itself
        are counted by ``writes``. Taken before a read, an equal stamp later says the read's
        answer still holds. One pragma: cheaper than the row it saves reading."""
        (version,) = self.get().execute("PRAGMA data_version").fetchone()
        return version, self.writes

    def peek(self) -> _Peek:
        """The connection, for one statement outside a transaction (a single SELECT is its
        own snapshot; no BEGIN and COMMIT around it)."""
        return _Peek(self)

    @contextmanager
    def _naming_the_file(self) -> Generator[None, None, None]:
        try:
            yield
        except sqlite3.DatabaseError as error:
            self.raise_named(error)
            raise

    def raise_named(self, error: sqlite3.DatabaseError) -> None:
        """Raise ``error`` as a ThreadStoreError naming the file, unless it is a constraint
        violation (the callers' to interpret).

        sqlite3 says "file is not a database" or "attempt to write a readonly database"
        without saying which file.
        """
        if not isinstance(error, sqlite3.IntegrityError):
            raise ThreadStoreError(f"{self.path}: {error}") from error

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()


CHECKPOINT_PAGES = 10_000
"""WAL pages (4 KiB each) a writer lets accumulate before it checkpoints."""


class _Peek:
    """The connection for one statement (a class: it runs on every API request)."""

    __slots__ = ("_connections",)

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    def __enter__(self) -> sqlite3.Connection:
        return self._connections.get()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(error, sqlite3.DatabaseError):
            self._connections.raise_named(error)


class _Write:
    """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction (a class rather than a generator
    context manager: a persisted run opens one per message, and this is cheaper)."""

    __slots__ = ("_conn", "_connections")

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    def __enter__(self) -> sqlite3.Connection:
        self._connections.writes += 1
        try:
            conn = self._conn = self._connections.get()
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as error:
            self._connections.raise_named(error)
            raise
        return conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn = self._conn
        try:
            if kind is None:
                conn.execute("COMMIT")
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.DatabaseError as failure:
            self._connections.raise_named(failure)
            raise
        finally:
            self._connections.writes += 1
        if isinstance(error, sqlite3.DatabaseError):
            self._connections.raise_named(error)
