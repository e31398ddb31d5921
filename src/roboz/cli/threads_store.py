"""A thread store opened directly by ``roboz threads list|show|export|delete``: ``--store
PATH`` (SQLite) or ``--url`` of a PostgreSQL database, read and changed as its operator does,
with no server and no token.

Whatever the path holds, the command ends with one line that names the file and the next
step: a missing file or folder, a file that is not a SQLite database, a SQLite database of
something else, a damaged one. Nothing is created or migrated on the way: a store is checked
read-only before a delete opens it for writing.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from roboz.cli.errors import CliError, CliUsageError

SQLITE_HEADER = b"SQLite format 3\x00"


def is_server_url(url: str) -> bool:
    """``--url`` names a ``roboz serve`` (http:// or https://), not a PostgreSQL database
    (postgresql:// or postgres://, or a conninfo string); any other scheme is refused."""
    scheme, sep, _ = url.partition("://")
    if sep and scheme.lower() not in ("http", "https", "postgresql", "postgres"):
        raise CliUsageError(
            f"--url must be a roboz serve (http://...) or a PostgreSQL database "
            f"(postgresql://... or a conninfo string), not {url!r}"
        )
    return scheme.lower() in ("http", "https") and bool(sep)


def url_beside(store: Path | None, url: str | None, envvar: str = "ROBOZ_SERVER_URL") -> str | None:
    """``--url`` as a command that also takes ``--store`` uses it: dropped when it only came
    from ``$envvar`` (the ``--store`` on the command line wins); both on the command line is
    a usage error."""
    if store is None or url is None:
        return url
    if url == os.environ.get(envvar):
        return None
    raise CliUsageError("give --store or --url, not both")


def _check_path(path: Path) -> None:
    """Refuse a path that cannot be a thread store before SQLite would create a file there."""
    if not path.parent.is_dir():
        raise CliUsageError(
            f"--store {path}: the folder {path.parent} does not exist; check the path"
        )
    if path.is_dir():
        raise CliUsageError(f"--store {path}: is a folder; give the thread store's file")
    if not path.exists():
        raise CliUsageError(
            f"--store {path}: no such thread store; check the path (an agent run with a "
            "SQLiteThreadStore creates it)"
        )
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise CliError(f"--store {path}: cannot read it: {error.strerror or error}") from None
    if header and header != SQLITE_HEADER:
        raise CliUsageError(f"--store {path}: not a SQLite database, so not a thread store")


def _explained(path: Path, error: Exception) -> CliError:
    """The store's refusal of ``path`` with the next step the reader needs."""
    text = str(error)
    if "malformed" in text or "not a database" in text or "disk I/O" in text:
        return CliError(
            f"--store {path}: damaged ({text.split(': ')[-1]}); restore it from a backup, or "
            f"copy out what SQLite can still read: sqlite3 {path} .recover | sqlite3 recovered.db"
        )
    return CliError(text)


def _foreign(path: Path) -> bool:
    """A SQLite database without RoboZ's thread tables (some other program's file)."""
    import sqlite3

    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError:
        return False  # damaged: the store's own error says so
    return bool(tables) and "threads" not in tables


def check_sqlite_store(path: Path) -> None:
    """Refuse, in one line with the next step, a path that is not a SQLite thread store."""
    _check_path(path)
    if _foreign(path):
        raise CliUsageError(
            f"--store {path}: a SQLite database without RoboZ's thread tables (another "
            "program's file?); check the path"
        )


def sqlite_schema_version(path: Path) -> int:
    """The thread schema version the file holds (SQLite's user_version), read-only."""
    import sqlite3

    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as error:
        raise _explained(path, error) from None


@contextmanager
def opened_store(
    store: Path | None, url: str | None, schema: str, *, write: bool = False
) -> Generator[Any]:
    """The store ``--store`` or ``--url`` names; every error of the store becomes one line."""
    from roboz.threads import (
        SchemaVersionError,
        ThreadBusyError,
        ThreadNotFoundError,
        ThreadStoreError,
    )

    url = url_beside(store, url)
    if store is None and url is None:
        raise CliUsageError("give --store PATH (SQLite) or --url (a server or PostgreSQL)")
    if url is not None:
        try:
            from roboz.threads.postgres import PostgresThreadStore
        except ImportError as error:  # pragma: no cover - psycopg is in the core install
            raise CliError(f"{error}; install roboz[postgres]") from error
        try:
            opened: Any = PostgresThreadStore(url, schema=schema)
        except (ThreadStoreError, SchemaVersionError) as error:
            raise CliUsageError(str(error)) from None
    else:
        assert store is not None
        check_sqlite_store(store)
        from roboz.threads import SQLiteThreadStore

        try:
            if write:  # checked read-only first: opening for writing would migrate tables
                SQLiteThreadStore(store, read_only=True).close()
            opened = SQLiteThreadStore(store, read_only=not write)
        except SchemaVersionError as error:
            raise CliError(str(error)) from None
        except ThreadStoreError as error:
            raise _explained(store, error) from None
    try:
        yield opened
    except ThreadNotFoundError as error:
        raise CliUsageError(str(error)) from None
    except ThreadBusyError as error:
        raise CliError(str(error)) from None
    except ThreadStoreError as error:
        if store is None:
            raise CliError(str(error)) from None
        raise _explained(store, error) from None
    finally:
        opened.close()


def threads_of(store: Any, ids: list[str]) -> Iterator[Any]:
    """The threads ``ids`` names (all of them, newest first, when it is empty), as the API
    shows them."""
    from roboz.threads import api_view

    if not ids:
        ids = [thread.thread_id for thread in store.list_threads(limit=2**62)]
    for thread_id in ids:
        yield api_view(store.get_thread(thread_id))
