"""A throwaway PostgreSQL cluster for the tests: initdb into a temp dir (as the ``postgres``
user when running as root, since initdb refuses root), a Unix socket in that dir only, fsync
off, stopped by its pid afterwards. Each store test gets its own migrated schema in it."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from roboz.threads import SQLiteThreadStore

PORT = 5432  # names the socket file in the cluster's private dir; no TCP port is opened


def find_bindir() -> Path | None:
    """The directory of initdb and pg_ctl: Debian's versioned dir, else PATH."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(candidate, "initdb"), os.X_OK):
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def _as_postgres() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


@dataclass
class Cluster:
    root: Path
    bindir: Path
    pid: int = 0
    tcp_port: int = 0
    """Non-zero: the server also listens on this loopback TCP port and the URL uses it, as
    servers of other hosts are reached (a stopped one refuses connections rather than
    lacking a socket file: see ``roboz.durable.outages``)."""
    _schemas = itertools.count()

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def url(self) -> str:
        if self.tcp_port:
            return f"host=127.0.0.1 port={self.tcp_port} user=postgres dbname=postgres"
        return f"host={self.socket_dir} port={PORT} user=postgres dbname=postgres"

    def new_schema(self) -> str:
        return f"t{os.getpid()}_{next(self._schemas)}"

    def run(self, *command: object) -> None:
        """Run a PostgreSQL program as the cluster's owner."""
        subprocess.run(
            [str(part) for part in command],
            check=True,
            capture_output=True,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
            **_as_postgres(),  # type: ignore[arg-type]
        )

    def start(self) -> None:
        listen = "127.0.0.1" if self.tcp_port else "''"
        options = (
            f"-k {self.socket_dir} -c listen_addresses={listen} -p {self.tcp_port or PORT} "
            "-c fsync=off -c max_connections=200"
        )
        data, log = self.root / "data", self.root / "log"
        self.run(self.bindir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "start")
        self.pid = int((data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if self.pid:
            stop(self.pid)
        self.pid = 0


def start_cluster(*, tcp: bool = False) -> Iterator[Cluster]:
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="roboz-pg-"))
    (root / "run").mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(root / "run", "postgres", "postgres")
    tcp_port = 0
    if tcp:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            tcp_port = probe.getsockname()[1]
    cluster = Cluster(root, bindir, tcp_port=tcp_port)
    try:
        initdb = [bindir / "initdb", "-A", "trust", "--no-sync", "-U", "postgres", "-E", "UTF8"]
        cluster.run(*initdb, "-D", root / "data")
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except (OSError, IndexError):
        return False


def stop(pid: int, timeout_s: float = 30.0) -> None:
    """Fast shutdown (SIGINT to the postmaster), then wait for it to be gone."""
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _running(pid):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A fresh, empty thread store of ``backend``: a SQLite file under ``tmp_path`` or a
    newly migrated schema in the session's PostgreSQL cluster."""
    if backend == "sqlite":
        return SQLiteThreadStore(tmp_path / "threads.db")
    from roboz.threads.postgres import PostgresThreadStore, migrate_database

    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    schema = cluster.new_schema()
    migrate_database(cluster.url, schema=schema)
    return PostgresThreadStore(cluster.url, schema=schema)


def store_from_spec(spec: str) -> Any:
    """The store a spec of :func:`store_spec` names (in a child process too)."""
    if spec.startswith("postgres:"):
        from roboz.threads.postgres import PostgresThreadStore

        schema, url = spec[len("postgres:") :].split(":", 1)
        return PostgresThreadStore(url, schema=schema)
    return SQLiteThreadStore(spec)


CHILD_PRELUDE = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
    "from tests.postgres import store_from_spec\n"
)
"""Prepend to the source of a ``python -c`` child that opens a store from a spec."""


def store_spec(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A string naming a fresh store, for a child process: a file path or
    ``postgres:SCHEMA:URL`` (with the schema migrated)."""
    if backend == "sqlite":
        return str(tmp_path / "runs.db")
    from roboz.threads.postgres import migrate_database

    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    schema = cluster.new_schema()
    migrate_database(cluster.url, schema=schema)
    return f"postgres:{schema}:{cluster.url}"


def execute_raw(spec: str, sql: str) -> None:
    """Run ``sql`` on the store's database behind the store's back."""
    if spec.startswith("postgres:"):
        import psycopg

        schema, url = spec[len("postgres:") :].split(":", 1)
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute(f'SET search_path TO "{schema}"')
            raw.execute(sql)  # type: ignore[arg-type]
        return
    import sqlite3

    with sqlite3.connect(spec) as raw:
        raw.execute(sql)


def execute_behind(store: Any, sql: str) -> None:
    """Run ``sql`` on the database of an open ``store`` (either backend) behind its back."""
    if isinstance(store, SQLiteThreadStore):
        execute_raw(str(store.path), sql)
    else:
        execute_raw(f"postgres:{store.schema}:{store.url}", sql)
