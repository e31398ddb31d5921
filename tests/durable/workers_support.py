"""Helpers of the worker tests: a fresh database per test, worker processes run through the
real ``roboz worker`` command, and their logs."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests import forked

ROOT = Path(__file__).resolve().parents[2]
_databases = itertools.count()


def fresh_database(base_url: str) -> str:
    """A new, empty database on the cluster of ``base_url``; returns its conninfo."""
    name = f"w{os.getpid()}_{next(_databases)}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    params = psycopg.conninfo.conninfo_to_dict(base_url)
    params["dbname"] = name
    return psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]


def prepare(url: str, app_schema: str | None = None) -> None:
    """Migrate as ``roboz threads migrate`` does (threads, DBOS, the workers' table), then
    run an app's own DDL."""
    from roboz.durable import migrate

    migrate(url)
    if app_schema:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in app_schema.split(";"):
                if statement.strip():
                    conn.execute(statement)  # type: ignore[arg-type]


def rows(url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def wait_until(
    predicate: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


FAST = ("--heartbeat-interval", "0.2", "--stale-after", "1.5")


@dataclass
class WorkerProcess:
    """``roboz worker`` in a child process, its output in a log file."""

    url: str
    name: str
    log: Path
    app: str = "tests.durable.plain_app:runs"
    queue: str = "plain"
    options: tuple[str, ...] = FAST
    env: dict[str, str] = field(default_factory=dict[str, str])
    process: forked.Process | None = None
    _started_at_offset: int = 0

    @property
    def executor_id(self) -> str:
        return f"{os.uname().nodename}:{self.queue}:{self.name}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> WorkerProcess:
        command = [
            "-m",
            "roboz.cli",
            "worker",
            "--app",
            self.app,
            "--url",
            self.url,
            "--name",
            self.name,
            *self.options,
        ]
        environment = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "ROBOZ_DURABLE_URL": self.url,
            **self.env,
        }
        # A restarted worker appends to the same log: only what it writes counts as its own.
        self._started_at_offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.process = forked.popen(
                command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT
            )
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_serving(self, timeout_s: float = 30.0) -> WorkerProcess:
        def serving() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"worker {self.name} exited early:\n{self.output()}")
            since_start = self.log.read_bytes()[self._started_at_offset :]
            return f"worker {self.executor_id} serving".encode() in since_start

        wait_until(serving, timeout_s, f"worker {self.name} to serve")
        return self

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.output()))

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout_s: float = 30.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def enqueue_plain(url: str, run_ids: list[str], steps: int) -> list[str]:
    """Enqueue ``plain_run`` for each id through a DBOS client (not a worker)."""
    from dbos import DBOSClient

    from roboz.durable._urls import sqlalchemy_url

    client = DBOSClient(
        system_database_url=sqlalchemy_url(url), application_name="roboz-worker-test"
    )
    try:
        for run_id in run_ids:
            client.enqueue(
                {"queue_name": "plain", "workflow_name": "plain_run", "workflow_id": run_id},
                run_id,
                steps,
            )
    finally:
        client.destroy()
    return run_ids


def statuses(url: str) -> dict[str, str]:
    return dict(
        rows(url, "SELECT workflow_uuid, status FROM dbos.workflow_status")  # type: ignore[arg-type]
    )
