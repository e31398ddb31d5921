"""The rules of ``roboz.durable.recovery`` on registries in this process (no DBOS): who counts
as dead, one winner, hung workers left alone, the grace after connecting, fencing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from roboz.durable.recovery import (
    ExecutorIdInUse,
    Fenced,
    Recovered,
    WorkerRegistry,
    migrate_workers,
)
from tests.durable.workers_support import fresh_database, rows
from tests.postgres import Cluster


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def url(postgres_cluster: Cluster) -> str:
    database = fresh_database(postgres_cluster.url)
    migrate_workers(database)
    return database


@pytest.fixture
def registries(url: str) -> Iterator[list[WorkerRegistry]]:
    made: list[WorkerRegistry] = []
    yield made
    for registry in made:
        registry.close()


def _registry(
    made: list[WorkerRegistry], url: str, executor_id: str, clock: Clock
) -> WorkerRegistry:
    registry = WorkerRegistry(
        url,
        executor_id=executor_id,
        queue="q",
        application_version="v1",
        host="h",
        pid=1,
        interval_s=0.5,
        stale_after_s=5.0,
        claim_timeout_s=0.2,
        clock=clock,
    )
    made.append(registry)
    return registry


def _silence(url: str, executor_id: str, seconds: float) -> None:
    rows(
        url,
        "UPDATE roboz.durable_workers SET heartbeat_at = now() - make_interval(secs => %s)"
        " WHERE executor_id = %s RETURNING 1",
        seconds,
        executor_id,
    )


def test_a_dead_worker_is_recovered_once_and_fenced_if_it_comes_back(
    url: str, registries: list[WorkerRegistry]
) -> None:
    clock = Clock()
    dead = _registry(registries, url, "dead", clock)
    dead.register()
    judges = [_registry(registries, url, f"live{i}", clock) for i in range(3)]
    for judge in judges:
        judge.register()
    resumed: list[str] = []
    _silence(url, "dead", 60)

    # Connected for less than a staleness period: no verdict yet.
    dead.close()  # its session ends: the lock is free
    assert judges[0].recover_dead(lambda e: resumed.append(e) or [f"{e}-wf"]) == []
    clock.now += 5.0

    # Three judges at once: one winner.
    start = threading.Barrier(3)
    found: list[list[Recovered]] = [[] for _ in judges]

    def judge(index: int) -> None:
        start.wait()
        found[index] = list(judges[index].recover_dead(lambda e: resumed.append(e) or [f"{e}-wf"]))

    threads = [threading.Thread(target=judge, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert resumed == ["dead"]
    winners = [f for f in found if f]
    assert len(winners) == 1
    (recovered,) = winners[0]
    assert recovered.executor_id == "dead" and recovered.workflow_ids == ("dead-wf",)
    assert recovered.silent_s >= 60
    for other in judges:
        assert other.recover_dead(lambda e: resumed.append(e) or []) == []
    assert resumed == ["dead"]

    # The dead worker was only cut off; it comes back and learns it was recovered.
    with pytest.raises(Fenced, match="declared dead and its runs recovered by live"):
        dead.beat()


def test_a_hung_worker_whose_session_lives_is_left_alone(
    url: str, registries: list[WorkerRegistry]
) -> None:
    clock = Clock()
    hung = _registry(registries, url, "hung", clock)
    hung.register()
    judge = _registry(registries, url, "judge", clock)
    judge.register()
    clock.now += 10
    _silence(url, "hung", 60)
    assert judge.recover_dead(lambda e: pytest.fail("resumed a live worker")) == []
    hung.beat()  # it was only slow


def test_a_stopped_worker_is_taken_over_at_once_and_may_come_back(
    url: str, registries: list[WorkerRegistry]
) -> None:
    clock = Clock()
    leaving = _registry(registries, url, "leaving", clock)
    leaving.register()
    judge = _registry(registries, url, "judge", clock)
    judge.register()  # connected just now: it may not judge silence yet, but a stop is said
    leaving.mark_stopped()
    leaving.close()
    (recovered,) = judge.recover_dead(lambda e: ["w1", "w2"])
    assert recovered.executor_id == "leaving" and recovered.workflow_ids == ("w1", "w2")
    again = _registry(registries, url, "leaving", clock)
    again.register()  # a restart under the same id starts afresh
    again.beat()
    ((recovered_at,),) = rows(
        url, "SELECT recovered_at FROM roboz.durable_workers WHERE executor_id = 'leaving'"
    )
    assert recovered_at is None


def test_the_same_executor_id_twice_is_refused_while_the_first_lives(
    url: str, registries: list[WorkerRegistry]
) -> None:
    clock = Clock()
    first = _registry(registries, url, "twin", clock)
    first.register()
    second = _registry(registries, url, "twin", clock)
    with pytest.raises(ExecutorIdInUse, match=r"'twin' is held by another live worker \(host h"):
        second.register()
    first.close()
    second.register()  # the first is gone: the id is free


def test_settings_are_checked(url: str) -> None:
    with pytest.raises(ValueError, match="below stale_after_s"):
        WorkerRegistry(
            url, executor_id="x", queue="q", application_version="v", host="h", pid=1,
            interval_s=5, stale_after_s=5,
        )  # fmt: skip
    with pytest.raises(ValueError, match="plain lower-case SQL name"):
        migrate_workers(url, schema="Bad-Name")
