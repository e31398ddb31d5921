"""Durable-run tests: a fresh, migrated database per test in the session's throwaway cluster,
and worker processes (DBOS is one runtime per process, so every worker is a subprocess; the
test process itself only uses clients)."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from roboz.durable import migrate
from tests import forked
from tests.postgres import Cluster

ROOT = Path(__file__).resolve().parents[2]
_databases = itertools.count()


def database_url(cluster: Cluster, name: str) -> str:
    return cluster.url.replace("dbname=postgres", f"dbname={name}")


@pytest.fixture
def empty_url(postgres_cluster: Cluster) -> str:
    """A new, empty database."""
    name = f"durable_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(postgres_cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(postgres_cluster, name)


@pytest.fixture
def durable_url(empty_url: str) -> str:
    """A new database with the thread schema, DBOS's tables and the tests' effects table."""
    url = empty_url
    migrate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE effects (key TEXT PRIMARY KEY, attempts INTEGER NOT NULL)")
    return url


class Worker:
    """A worker subprocess serving ``tests.durable.app`` under one executor id."""

    def __init__(self, url: str, executor_id: str, **env: str) -> None:
        self.executor_id = executor_id
        self.process = forked.popen(
            ["-m", "tests.durable.worker_main", executor_id],
            cwd=ROOT,
            env={**os.environ, "ROBOZ_TEST_DURABLE_URL": url, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            raise RuntimeError(f"worker {executor_id} did not start: {line}{err[-2000:]}")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def workers(durable_url: str) -> Iterator[list[Worker]]:
    """Workers a test starts (``workers.append(Worker(...))``) are stopped afterwards."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()
