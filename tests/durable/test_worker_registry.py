"""The rules of ``roboz.durable.recovery`` on registries in this process (no DBOS): who counts
as dead (a session that ended, a stop, a silence), one winner, hung workers left alone, the
grace after connecting and after a freed lock, fencing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from roboz.durable.recovery import (
    ExecutorIdInUse,
    Fenced,
    Recovered,
    WorkerRegistry,
    lock_key,
    migrate_workers,
)
from tests.durable.workers_support import fresh_database, rows, wait_until
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
    assert not judge.watch()
    clock.now += 10
    _silence(url, "hung", 60)
    assert not judge.watch()
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
    assert not judge.watch()  # said it stopped, but its session still holds the lock
    _close(leaving)
    assert judge.watch()  # no grace for a worker that said it left
    (recovered,) = judge.recover_dead(lambda e: ["w1", "w2"])
    assert recovered.executor_id == "leaving" and recovered.workflow_ids == ("w1", "w2")
    assert recovered.why == "stopped"
    again = _registry(registries, url, "leaving", clock)
    again.register()  # a restart under the same id starts afresh
    again.beat()
    ((recovered_at,),) = rows(
        url, "SELECT recovered_at FROM roboz.durable_workers WHERE executor_id = 'leaving'"
    )
    assert recovered_at is None


def _holders(url: str, executor_id: str) -> list[tuple[int]]:
    """The backends holding ``executor_id``'s session lock (as pg_locks shows a bigint key)."""
    key = lock_key(executor_id) & (1 << 64) - 1
    return rows(
        url,
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
        " AND classid::int8 = %s AND objid::int8 = %s",
        key >> 32,
        key & 0xFFFFFFFF,
    )  # type: ignore[return-value]


def _close(registry: WorkerRegistry) -> None:
    """Close its session and wait for the server to have ended it (asynchronously, as a dying
    process's session ends)."""
    registry.close()
    wait_until(lambda: not _holders(registry.url, registry.executor_id), 10, "the lock freed")


def _end_session_of(url: str, executor_id: str) -> None:
    """End the session holding ``executor_id``'s lock from outside, as an administrator's
    pg_terminate_backend or a dropped connection would, leaving its process alive."""
    ((pid,),) = _holders(url, executor_id)
    assert rows(url, "SELECT pg_terminate_backend(%s)", pid) == [(True,)]
    wait_until(lambda: not _holders(url, executor_id), 10, "the lock freed")


def test_a_worker_whose_session_ended_is_recovered_after_the_grace_not_its_silence(
    url: str, registries: list[WorkerRegistry]
) -> None:
    clock = Clock()
    judge = _registry(registries, url, "judge", clock)
    judge.register()
    dead = _registry(registries, url, "dead", clock)
    dead.register()
    assert not judge.watch()  # sees its lock held
    _close(dead)  # the process died: its session and lock are gone, its beat is fresh
    assert not judge.watch()
    clock.now += judge.grace_s / 2
    assert not judge.watch()
    assert judge.recover_dead(lambda e: pytest.fail("resumed within the grace")) == []
    clock.now += judge.grace_s / 2
    assert judge.watch()
    assert not judge.may_judge()  # connected for less than a staleness period: no matter
    (recovered,) = judge.recover_dead(lambda e: [f"{e}-wf"])
    assert recovered.executor_id == "dead" and recovered.workflow_ids == ("dead-wf",)
    assert recovered.why == "session ended" and recovered.silent_s < 5
    assert not judge.watch()  # recovered: no longer watched
    assert judge.recover_dead(lambda e: pytest.fail("resumed twice")) == []
    with pytest.raises(Fenced, match="declared dead and its runs recovered by judge"):
        dead.beat()


def test_a_session_lost_while_the_worker_lives_is_taken_back_within_the_grace(
    url: str, registries: list[WorkerRegistry]
) -> None:
    clock = Clock()
    judge = _registry(registries, url, "judge", clock)
    judge.register()
    alive = _registry(registries, url, "alive", clock)
    alive.register()
    assert not judge.watch()
    _end_session_of(url, "alive")
    assert not judge.watch()  # free: the grace starts
    clock.now += judge.grace_s / 2
    assert not judge.watch()
    assert judge.recover_dead(lambda e: pytest.fail("resumed within the grace")) == []
    with pytest.raises(psycopg.OperationalError, match="terminating connection"):
        alive.watch()  # its next look finds its session gone...
    alive.beat()  # ...and the next tick reconnects and takes its lock back
    clock.now += 3 * judge.grace_s
    assert not judge.watch()
    assert judge.recover_dead(lambda e: pytest.fail("resumed a live worker")) == []
    alive.beat()


def test_a_lock_never_seen_held_waits_for_the_silence(
    url: str, registries: list[WorkerRegistry]
) -> None:
    # As after a PostgreSQL restart: every session ended, and a worker that reconnects first
    # cannot tell a peer still on its way back from a dead one.
    clock = Clock()
    gone = _registry(registries, url, "gone", clock)
    gone.register()
    _close(gone)
    judge = _registry(registries, url, "judge", clock)
    judge.register()
    for _ in range(3):
        assert not judge.watch()
        clock.now += judge.grace_s
    assert judge.recover_dead(lambda e: pytest.fail("resumed without having watched")) == []
    clock.now += judge.stale_after_s
    _silence(url, "gone", judge.stale_after_s + 1)
    (recovered,) = judge.recover_dead(lambda e: [])
    assert recovered.why == "silent" and recovered.executor_id == "gone"


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
    with pytest.raises(ValueError, match="grace_s must not be negative"):
        WorkerRegistry(
            url, executor_id="x", queue="q", application_version="v", host="h", pid=1,
            grace_s=-1,
        )  # fmt: skip
    with pytest.raises(ValueError, match="plain lower-case SQL name"):
        migrate_workers(url, schema="Bad-Name")
