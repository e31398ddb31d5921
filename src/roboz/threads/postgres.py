"""A thread store on PostgreSQL (psycopg 3; install ``roboz[postgres]``), shared by agents on
many hosts.

It behaves as :class:`~roboz.threads.store.SQLiteThreadStore` does (the logic is the same
code, ``_base``); what differs is how it holds its transactions and its run leases:

- Writes to one thread serialize on a transaction-scoped advisory lock of that thread, so
  writers of different threads proceed in parallel while a thread's sequence numbers and
  revisions stay gapless. Reads run in one REPEATABLE READ snapshot.
- A run lease is held by a session-level advisory lock on a connection the store keeps open.
  When the holding process dies, on any host, PostgreSQL ends its session and drops the lock,
  so the next opener sees the holder is gone and marks the run interrupted: a live holder on
  another host is told apart from a dead one by the database. (A holder on this host is
  checked through ``/proc`` instead, which knows of a death before the server does and is
  not fooled by a server restart, which drops every lock.)

The schema is created and migrated only by ``roboz threads migrate --url URL``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Generator, Iterable, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, LiteralString, cast

from roboz.threads._access import AccessMixin
from roboz.threads._base import ThreadStoreBase
from roboz.threads._ledger import LedgerMixin
from roboz.threads._pg_schema import SCHEMA_VERSION, check_version, migrate, read_version
from roboz.threads._runs import on_this_host
from roboz.threads._sql import Conn, Cursor
from roboz.threads._tokens import TokenMixin
from roboz.threads.errors import SchemaVersionError, ThreadStoreError

if TYPE_CHECKING:
    import psycopg

_WRITE_LOCK = 0x526F425A  # first key of a thread's write lock ("RoBZ"); the second is its hash
_CONNECT = {
    "connect_timeout": 10,
    # A host that vanishes without closing its TCP connections loses its sessions (and so
    # its run leases) within about half a minute instead of the kernel's two hours.
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
_PLACEHOLDER = re.compile(r"\?(\d*)")


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ThreadStoreError(
            "the PostgreSQL thread store needs psycopg: pip install 'roboz[postgres]'"
        ) from None
    return psycopg


@lru_cache(maxsize=512)
def _translate(sql: str) -> tuple[str, tuple[int, ...] | None]:
    """The shared SQL in psycopg's placeholders: ``?`` becomes ``%s``; numbered ``?N``
    become ``%s`` too, with the order in which to pass the parameters."""
    order: list[int] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1):
            order.append(int(match.group(1)) - 1)
        return "%s"

    text = _PLACEHOLDER.sub(placeholder, sql.replace("%", "%%"))
    return text, tuple(order) if order else None


class _Connection:
    """A psycopg connection that speaks the shared SQL (see ``roboz.threads._sql``)."""

    __slots__ = ("raw",)

    def __init__(self, raw: psycopg.Connection[Any] | Any) -> None:
        self.raw: Any = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        text, order = _translate(sql)
        params = parameters if order is None else [parameters[i] for i in order]
        # The shared SQL is built from literals only; psycopg wants that spelled LiteralString.
        return self.raw.execute(cast(Any, text), params)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        text, order = _translate(sql)
        rows = [p if order is None else [p[i] for i in order] for p in parameters]
        cursor = getattr(self.raw, "cursor", None)
        if cursor is None:  # a connection wrapped by someone else (a DBOS transaction's)
            for row in rows:
                self.raw.execute(cast(Any, text), row)
            return None
        with cursor() as opened:
            opened.executemany(cast(Any, text), rows)
        return None


def check_schema_name(schema: str) -> None:
    """A schema name is spliced into SQL (quoted): only plain lower-case names are taken."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise ValueError(f"schema must be a plain lower-case SQL name, not {schema!r}")


def _key(text: str) -> int:
    """A stable signed 64-bit key for an advisory lock (collisions only serialize)."""
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def describe(url: str) -> str:
    """The server and database ``url`` names, without its password: ``PostgreSQL at HOST:PORT
    (database DB)``."""
    pg = _import_psycopg()
    try:
        params = pg.conninfo.conninfo_to_dict(url)
    except pg.ProgrammingError as error:
        raise ThreadStoreError(
            f"not a PostgreSQL URL {redacted(url)!r}: "
            + _first_line(error).replace(url, redacted(url))
        ) from None
    port = params.get("port") or "5432"
    # libpq checks the port only when it connects, where a typo would read as a server that
    # is down; one port per host, comma-separated.
    if not all(part.isdigit() or not part for part in str(port).split(",")):
        raise ThreadStoreError(
            f"not a PostgreSQL URL {redacted(url)!r}: port {port!r} is not a number"
        )
    host = params.get("host") or "localhost"
    database = params.get("dbname") or params.get("user") or "(default)"
    return f"PostgreSQL at {host}:{port} (database {database})"


def redacted(url: str) -> str:
    """``url`` with any password replaced, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", re.sub(r"(password=)\S+", r"\1***", url))


def connect(url: str, where: str) -> psycopg.Connection[Any]:
    """An autocommit connection to ``url``; a failure is one line naming the server."""
    pg = _import_psycopg()
    try:
        raw: psycopg.Connection[Any] = pg.connect(url, autocommit=True, **_CONNECT)
    except pg.Error as error:
        raise ThreadStoreError(
            f"cannot connect to {where}: {_first_line(error).replace(url, redacted(url))}; "
            "check the URL and that the "
            "server is running"
        ) from None
    return raw


class PostgresThreadStore(ThreadStoreBase, LedgerMixin, AccessMixin, TokenMixin):
    """Threads, messages, tasks, goals, compressed variants, run leases and the Librarian's
    ledger in PostgreSQL.

    ``url`` is a libpq URL or conninfo string (``postgresql://user@host/db``,
    ``host=/run/postgresql dbname=roboz``); ``schema`` is the PostgreSQL schema holding the
    tables. The schema must exist at this RoboZ's version: run ``roboz threads migrate``.
    """

    _visibility_sql = "(t.meta::json ->> 'visibility')"
    _ilike = "ILIKE"

    def __init__(self, url: str, *, schema: str = "roboz", read_only: bool = False) -> None:
        check_schema_name(schema)
        self._psycopg = _import_psycopg()
        self.url = url
        self.schema = schema
        self.read_only = read_only
        """A read-only store reads threads (e.g. for a user interface) and refuses runs."""
        self._where = describe(url)
        self._duplicate_key = (self._psycopg.IntegrityError,)
        self._local = threading.local()
        self._opened: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._lease_conn: psycopg.Connection[Any] | None = None
        self._lease_lock = threading.Lock()
        hint = f"roboz threads migrate --url '{redacted(url)}'"
        if schema != "roboz":
            hint += f" --schema {schema}"
        try:
            with self._read() as conn:
                version = read_version(cast(_Connection, conn).raw, schema, self._where)
            check_version(version, self._where, hint)
        except (ThreadStoreError, SchemaVersionError):
            self.close()
            raise

    # -- connections --------------------------------------------------------------------------

    def _get(self) -> psycopg.Connection[Any]:
        raw: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if raw is None or raw.closed or raw.broken:
            raw = connect(self.url, self._where)
            raw.execute("SELECT set_config('search_path', %s, false)", (f'"{self.schema}"',))
            self._local.conn = raw
            with self._lock:
                self._opened.append(raw)
        return raw

    @contextmanager
    def _transaction(self, begin: LiteralString, lock: int | None) -> Generator[Conn, None, None]:
        pg = self._psycopg
        raw = self._get()
        try:
            try:
                raw.execute(begin)
            except pg.OperationalError:
                # A connection the server dropped (a restart, an idle timeout) fails at its
                # next use; nothing of this transaction was sent yet, so a new one is safe.
                raw.close()
                raw = self._get()
                raw.execute(begin)
            try:
                if lock is not None:
                    raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_WRITE_LOCK, lock))
                yield _Connection(raw)
            except BaseException:
                if not raw.closed and not raw.broken:
                    raw.execute("ROLLBACK")
                raise
            raw.execute("COMMIT")
        except pg.IntegrityError:
            raise  # the callers interpret constraint violations
        except pg.OperationalError as error:
            raise ThreadStoreError(
                f"{self._where}: {_first_line(error)}; check that the server is running"
            ) from None
        except pg.Error as error:
            raise ThreadStoreError(f"{self._where}: {_first_line(error)}") from None

    def _write(self, thread_id: str) -> Any:
        begin: LiteralString = "BEGIN READ ONLY" if self.read_only else "BEGIN"
        # Hashed to 32 bits for the two-key form, which keeps RoboZ's locks apart from others'.
        return self._transaction(begin, _key(thread_id) & 0x7FFFFFFF)

    def _read(self) -> Any:
        return self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None)

    def close(self) -> None:
        """Close every connection this store opened (releasing the leases it holds)."""
        with self._lock:
            opened, self._opened = self._opened, []
        with self._lease_lock:
            if self._lease_conn is not None:
                opened.append(self._lease_conn)
            self._lease_conn = None
        for raw in opened:
            raw.close()
        self._local = threading.local()

    def __enter__(self) -> PostgresThreadStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- run leases ---------------------------------------------------------------------------

    def _take_lease(self, owner: str) -> tuple[int | None, str | None]:
        with self._lease_lock:
            raw = self._lease_conn
            if raw is not None and not raw.closed and not raw.broken:
                try:
                    raw.execute("SELECT 1")
                except self._psycopg.OperationalError:
                    raw.close()  # dropped by the server, with the locks it held
            if raw is None or raw.closed or raw.broken:
                raw = self._lease_conn = connect(self.url, self._where)
            raw.execute("SELECT pg_advisory_lock(%s)", (_key(owner),))
        return super()._take_lease(owner)

    def _owner_alive(self, conn: Conn, owner: str, pid: int | None, start: str | None) -> bool:
        # A process of this host is checked directly: /proc knows of its death before the
        # server notices its session ended, and a server restart (which drops every lock)
        # does not make it look dead. Another host's process is alive while its lock is held.
        if on_this_host(owner):
            return super()._owner_alive(conn, owner, pid, start)
        key = _key(owner) & 0xFFFFFFFFFFFFFFFF
        (held,) = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 1 AND classid::bigint = ? AND objid::bigint = ?",
            (key >> 32, key & 0xFFFFFFFF),
        ).fetchone()
        return bool(held)

    def _lease_ended(self, owner: str) -> None:
        with self._lease_lock:
            raw = self._lease_conn
            if raw is None or raw.closed or raw.broken:
                return
            try:
                raw.execute("SELECT pg_advisory_unlock(%s)", (_key(owner),))
            except self._psycopg.Error:
                raw.close()  # its session's locks go with it


def migrate_database(url: str, *, schema: str = "roboz") -> tuple[str, int, int]:
    """Create or migrate the thread schema at ``url``; returns (server, before, after)."""
    where = describe(url)
    pg = _import_psycopg()
    raw = connect(url, where)
    try:
        before, after = migrate(raw, schema, where)
    except pg.Error as error:
        raise ThreadStoreError(f"{where}: migration failed: {_first_line(error)}") from None
    finally:
        raw.close()
    return where, before, after


__all__ = [
    "SCHEMA_VERSION",
    "PostgresThreadStore",
    "check_schema_name",
    "describe",
    "migrate_database",
    "redacted",
]
