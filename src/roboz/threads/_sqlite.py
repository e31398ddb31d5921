"""SQLite connections of the thread store: one per Python thread, explicit transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    @contextmanager
    def write(self, thread_id: str = "") -> Iterator[sqlite3.Connection]:
        # One lock for the whole file: writers of different threads queue too.
        del thread_id
        with self._naming_the_file():
            conn = self.get()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self._naming_the_file():
            conn = self.get()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    @contextmanager
    def _naming_the_file(self) -> Iterator[None]:
        # sqlite3 says "file is not a database" or "attempt to write a readonly database"
        # without saying which file; constraint violations are the callers' to interpret.
        try:
            yield
        except sqlite3.IntegrityError:
            raise
        except sqlite3.DatabaseError as error:
            raise ThreadStoreError(f"{self.path}: {error}") from error

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()
