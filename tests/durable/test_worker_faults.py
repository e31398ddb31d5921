"""``roboz worker`` when PostgreSQL goes away or was never right: backoff without spinning,
resumption when the server is back, and one clear line for a wrong URL or a missing schema."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durable.plain_app import SCHEMA
from tests.durable.workers_support import (
    ROOT,
    WorkerProcess,
    enqueue_plain,
    fresh_database,
    prepare,
    rows,
    statuses,
    wait_until,
)
from tests.postgres import Cluster, start_cluster

pytest.importorskip("dbos")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def own_cluster(postgres_cluster: Cluster) -> Iterator[Cluster]:
    """A cluster of this test's own, to stop and start, reached over TCP as other hosts reach
    it (the session's serves other tests; requesting it makes a missing PostgreSQL a failure
    in CI)."""
    yield from start_cluster(tcp=True)


def test_a_worker_that_loses_postgres_backs_off_then_resumes_its_runs(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    url = fresh_database(own_cluster.url)
    prepare(url, SCHEMA)
    slow_steps = {"ROBOZ_TEST_STEP_SECONDS": "0.1"}
    team = [
        WorkerProcess(url, name, tmp_path / f"worker-{name}.log", env=slow_steps)
        for name in ("a", "b")
    ]
    try:
        for worker in team:
            worker.start()
        for worker in team:
            worker.wait_serving()
        ids = enqueue_plain(url, ["long1", "long2"], 30)
        wait_until(lambda: len(rows(url, "SELECT 1 FROM proof.effects")) >= 4, 30, "progress")
        before = [_cpu_seconds(worker.pid) for worker in team]
        started = time.monotonic()
        own_cluster.stop()
        time.sleep(4)
        outage = time.monotonic() - started
        cpu = [_cpu_seconds(worker.pid) - was for worker, was in zip(team, before, strict=True)]
        attempts = [worker.count(r"PostgreSQL unreachable \(attempt \d+\)") for worker in team]
        print(f"outage {outage:.1f} s: CPU {cpu} s, beat attempts {attempts}")
        for worker, used, tried in zip(team, cpu, attempts, strict=True):
            assert worker.process is not None and worker.process.poll() is None
            # Retrying, but with backoff: a spinning worker would burn a core.
            assert 2 <= tried <= outage / 0.15
            assert used < 0.3 * outage
        own_cluster.start()
        wait_until(
            lambda: all(statuses(url).get(i) == "SUCCESS" for i in ids), 60, "runs to finish"
        )
        for worker in team:
            assert worker.count("PostgreSQL is back after") == 1
            # The outage outlasted the staleness period, yet nobody was declared dead.
            assert worker.count("resumed its") == 0
        effects = dict(rows(url, "SELECT key, count(*) FROM proof.effects GROUP BY key"))
        tries = rows(url, "SELECT count(*) FROM proof.attempts")[0][0]
        print(f"attempts {tries}, effects {sum(effects.values())}")
        assert len(effects) == 60 and set(effects.values()) == {1}
    finally:
        for worker in team:
            worker.stop()


def _worker(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "roboz.cli",
            "worker",
            "--app",
            "tests.durable.plain_app:runs",
            *arguments,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_wrong_url_is_one_line_naming_the_server_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://roboz:s3cret@/roboz?host={tmp_path}"
    done = _worker(env={"ROBOZ_DURABLE_URL": url})
    assert done.returncode == 1
    assert "s3cret" not in done.stderr + done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        f"roboz: error: cannot connect to PostgreSQL at {tmp_path}:5432 (database roboz): "
    )
    assert line.endswith("check the URL and that the server is running")


def test_a_database_without_the_schema_says_what_to_run(postgres_cluster: Cluster) -> None:
    url = fresh_database(postgres_cluster.url)
    done = _worker(env={"ROBOZ_DURABLE_URL": url})
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    database = url.split("dbname=")[1].split()[0]
    assert line == (
        f"roboz: error: PostgreSQL at {postgres_cluster.socket_dir}:5432 (database {database}) "
        f"has no durable worker table in schema roboz: run roboz threads migrate --url '{url}'"
    )


def test_bad_options_are_usage_errors(postgres_cluster: Cluster) -> None:
    url = fresh_database(postgres_cluster.url)
    env = {"ROBOZ_DURABLE_URL": url}
    done = _worker("--heartbeat-interval", "2", "--stale-after", "3", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("roboz: error: --stale-after (3 s) must exceed twice")
    done = _worker("--queue", "other", env=env)
    assert done.returncode == 2
    assert done.stderr == (
        "roboz: error: --queue is 'other' but tests.durable.plain_app:runs serves queue 'plain'\n"
    )
    other = fresh_database(postgres_cluster.url)
    done = _worker("--url", other, env=env)
    assert done.returncode == 2
    assert "--url names PostgreSQL at" in done.stderr


def test_help_says_what_a_worker_does() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "roboz.cli", "worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    for words in (
        "heartbeat in PostgreSQL",
        "resume the runs of dead workers",
        "--executor-id ID",
        "HOST:QUEUE:NAME",
        "SIGTERM",
    ):
        assert words in text
