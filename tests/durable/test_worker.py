"""``roboz worker``: executor ids, heartbeats, recovery of dead workers (one winner), clean
shutdown; against plain DBOS workflows (tests/durable/plain_app.py) in real worker processes
on a throwaway PostgreSQL cluster."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durable.plain_app import SCHEMA
from tests.durable.workers_support import (
    FAST,
    WorkerProcess,
    enqueue_plain,
    fresh_database,
    prepare,
    rows,
    statuses,
    wait_until,
)
from tests.postgres import Cluster

pytest.importorskip("dbos")


@pytest.fixture
def url(postgres_cluster: Cluster) -> str:
    database = fresh_database(postgres_cluster.url)
    prepare(database, SCHEMA)
    return database


@pytest.fixture
def workers(url: str, tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _spawn(
    workers: list[WorkerProcess], url: str, tmp_path: Path, name: str, **settings: object
) -> WorkerProcess:
    worker = WorkerProcess(url, name, tmp_path / f"worker-{name}.log", **settings)  # type: ignore[arg-type]
    workers.append(worker.start())
    return worker


def _effects_once(url: str, run_ids: list[str], steps: int) -> None:
    counts = dict(rows(url, "SELECT key, count(*) FROM proof.effects GROUP BY key"))
    attempts = dict(rows(url, "SELECT key, count(*) FROM proof.attempts GROUP BY key"))
    print(f"attempts {sum(attempts.values())}, effects {sum(counts.values())}")
    expected = {f"{run}:{step}" for run in run_ids for step in range(1, steps + 1)}
    assert set(counts) == expected
    assert set(counts.values()) == {1}


def test_a_second_live_worker_with_the_same_executor_id_is_refused(
    url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    first = _spawn(workers, url, tmp_path, "a").wait_serving()
    second = _spawn(workers, url, tmp_path, "a")
    assert second.process is not None
    assert second.process.wait(30) == 1
    lines = second.output().strip().splitlines()
    assert lines[-1] == (
        f"roboz: error: executor id {first.executor_id!r} is held by another live worker "
        f"(host {first.executor_id.split(':')[0]}, pid {first.pid}); give each worker its own "
        "--name or --executor-id"
    )
    assert first.process is not None and first.process.poll() is None
    # The first still serves.
    ids = enqueue_plain(url, ["r1"], 2)
    wait_until(lambda: statuses(url).get("r1") == "SUCCESS", 30, "r1 to succeed")
    _effects_once(url, ids, 2)


def test_a_killed_workers_runs_are_resumed_by_exactly_one_live_worker(
    url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    hold = {"ROBOZ_TEST_HOLD": "held"}
    team = [_spawn(workers, url, tmp_path, name, env=hold) for name in ("a", "b", "c")]
    for worker in team:
        worker.wait_serving()
    ids = enqueue_plain(url, ["held", *(f"r{i}" for i in range(8))], 3)
    inflight = wait_until(
        lambda: rows(url, "SELECT executor, pid FROM proof.inflight"), 30, "the held step"
    )
    (executor, pid), *_ = inflight
    victim = next(worker for worker in team if worker.pid == pid)
    assert victim.executor_id == executor
    victim.kill()
    wait_until(
        lambda: all(statuses(url).get(i) == "SUCCESS" for i in ids), 45, "every run to succeed"
    )
    survivors = [worker for worker in team if worker is not victim]
    winners = [w for w in survivors if w.count(f"worker {victim.executor_id} .* resumed its")]
    assert len(winners) == 1, [w.output() for w in survivors]
    _effects_once(url, ids, 3)
    held_attempts = rows(
        url, "SELECT executor FROM proof.attempts WHERE key = 'held:1' ORDER BY at"
    )
    assert len(held_attempts) == 2 and held_attempts[0][0] == victim.executor_id
    (recovered_by,) = rows(
        url,
        "SELECT recovered_by FROM roboz.durable_workers WHERE executor_id = %s",
        victim.executor_id,
    )
    assert recovered_by[0] == winners[0].executor_id


def test_a_worker_restarted_under_its_name_resumes_its_own_runs(
    url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    # Nobody else would recover them within the test: the staleness period is long.
    slow = ("--heartbeat-interval", "0.5", "--stale-after", "300")
    first = _spawn(workers, url, tmp_path, "a", options=slow, env={"ROBOZ_TEST_HOLD": "held"})
    first.wait_serving()
    ids = enqueue_plain(url, ["held"], 2)
    wait_until(lambda: rows(url, "SELECT 1 FROM proof.inflight"), 30, "the held step")
    first.kill()
    again = _spawn(workers, url, tmp_path, "a", options=slow).wait_serving()
    wait_until(lambda: statuses(url).get("held") == "SUCCESS", 30, "the run to finish")
    assert again.count("resumed its") == 0
    _effects_once(url, ids, 2)


def test_sigterm_stops_cleanly_and_hands_the_runs_over_at_once(
    url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    slow = ("--heartbeat-interval", "0.2", "--stale-after", "300")
    leaving = _spawn(workers, url, tmp_path, "a", options=slow, env={"ROBOZ_TEST_HOLD": "held"})
    leaving.wait_serving()
    ids = enqueue_plain(url, ["held"], 2)
    wait_until(lambda: rows(url, "SELECT 1 FROM proof.inflight"), 30, "the held step")
    staying = _spawn(workers, url, tmp_path, "b", options=slow).wait_serving()
    assert leaving.terminate() == 0
    (stopped,) = rows(
        url,
        "SELECT stopped_at IS NOT NULL FROM roboz.durable_workers WHERE executor_id = %s",
        leaving.executor_id,
    )
    assert stopped[0]
    # A stopped worker is not waited for: well before 300 s of silence, the other takes over.
    wait_until(lambda: statuses(url).get("held") == "SUCCESS", 30, "the run to finish")
    assert staying.count(f"worker {leaving.executor_id} .* resumed its 1 pending run") == 1
    _effects_once(url, ids, 2)


def test_executor_id_and_concurrency_options(
    url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    options = ("--executor-id", "rack-7/slot-2", "--concurrency", "1", *FAST)
    worker = WorkerProcess(url, "ignored", tmp_path / "worker.log", options=options)
    workers.append(worker.start())
    wait_until(lambda: "worker rack-7/slot-2 serving" in worker.output(), 30, "serving")
    ids = enqueue_plain(url, ["c1", "c2", "c3"], 2)
    wait_until(lambda: all(statuses(url).get(i) == "SUCCESS" for i in ids), 30, "the runs")
    ((executor,),) = rows(url, "SELECT executor_id FROM roboz.durable_workers")
    assert executor == "rack-7/slot-2"
    # One run at a time: each run's steps all come before the next run's.
    spans = rows(
        url,
        "SELECT min(at), max(at) FROM proof.attempts GROUP BY split_part(key, ':', 1) ORDER BY 1",
    )
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end < start
