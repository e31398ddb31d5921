"""The proof of durable runs across worker processes (issue 18).

Three ``roboz worker`` processes serve 30 queued agent turns (10 threads, 3 turns each) on a
scripted endpoint; every turn makes tool steps with an external effect keyed by
``idempotency_key()``. One worker is SIGKILLed while a tool step of one of its turns is in
flight. Then: every turn succeeded exactly once, every (turn, step) effect happened exactly
once (attempts may be more), each thread's messages carry contiguous sequence numbers and are
the same as every other thread's (no message lost or written twice), and no two turns of a
thread overlapped. The whole test runs under a 60 s deadline. A second test restarts
PostgreSQL in the middle of the runs.
"""

from __future__ import annotations

import itertools
import re
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.durable.workers_support import (
    WorkerProcess,
    fresh_database,
    prepare,
    rows,
    statuses,
    wait_until,
)
from tests.postgres import Cluster, start_cluster

pytest.importorskip("dbos")

THREADS, TURNS = 10, 3
RUNTIME = re.compile(r'runtime_ms\\": \d+')  # how long a tool took differs, nothing else
APP = "tests.durable.proof_app:runs"
FAST = ("--heartbeat-interval", "0.2", "--stale-after", "1.5")


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail the test (from the main thread) once ``seconds`` have passed."""

    def expired(_signum: int, _frame: FrameType | None) -> None:
        raise TimeoutError(f"the proof took longer than its {seconds:g} s deadline")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _team(url: str, tmp_path: Path, hold: str = "") -> list[WorkerProcess]:
    env = {"ROBOZ_TEST_HOLD": hold} if hold else {}
    return [
        WorkerProcess(
            url,
            name,
            tmp_path / f"worker-{name}.log",
            app=APP,
            queue="proof",
            options=FAST,
            env=env,
        )
        for name in ("a", "b", "c")
    ]


def _enqueue_all(url: str) -> list[str]:
    from roboz.durable import DurableClient

    ids: list[str] = []
    with DurableClient(url, queue="proof") as client:
        for turn in range(TURNS):
            for thread in range(THREADS):
                handle = client.enqueue("prover", f"turn {turn}", thread_id=f"t{thread}", turn=turn)
                ids.append(handle.workflow_id)
    return ids


def _thread_rows(url: str, thread_id: str) -> list[tuple[int, str, str]]:
    found = rows(
        url,
        "SELECT seq, role, content FROM roboz.messages WHERE thread_id = %s ORDER BY seq",
        thread_id,
    )
    return [(int(seq), str(role), str(content)) for seq, role, content in found]


def _check_everything(url: str, ids: list[str]) -> dict[str, Any]:
    """The exactly-once and ordering claims; returns the figures to print."""
    done = statuses(url)
    assert sorted(done[i] for i in ids) == ["SUCCESS"] * len(ids)
    assert len(done) == len(ids)  # no run was started twice under another id

    # Every (turn, step) effect exactly once, under the key of its step.
    effects = dict(rows(url, "SELECT key, count(*) FROM proof.effects GROUP BY key"))
    attempts = dict(rows(url, "SELECT key, count(*) FROM proof.attempts GROUP BY key"))
    assert set(effects.values()) == {1}
    assert set(effects) == set(attempts)
    per_turn: dict[str, int] = defaultdict(int)
    for key in effects:
        per_turn[key.rsplit(":", 1)[0]] += 1
    assert per_turn == dict.fromkeys(ids, 2)

    # Contiguous sequence numbers; every thread holds exactly what every other thread holds.
    reference: list[tuple[int, str, str]] | None = None
    for thread in range(THREADS):
        thread_id = f"t{thread}"
        written = _thread_rows(url, thread_id)
        assert [seq for seq, _, _ in written] == list(range(len(written)))
        normalized = [
            (s, r, RUNTIME.sub("", c.replace(f"{thread_id}/", "T/"))) for s, r, c in written
        ]
        if reference is None:
            reference = normalized
        assert normalized == reference, thread_id
        users = [c for _, r, c in written if r == "user" and "turn " in c]
        assert len(users) == TURNS
    assert reference is not None

    # Turns of a thread never overlapped: each one's LLM calls (re-runs included) all came
    # before the next turn's first.
    spans: dict[str, list[float]] = {}
    for workflow_id, first, last in rows(
        url,
        "SELECT workflow_id, min(extract(epoch FROM at)), max(extract(epoch FROM at))"
        " FROM proof.turns GROUP BY workflow_id",
    ):
        spans[str(workflow_id)] = [float(first), float(last)]
    for thread in range(THREADS):
        ordered = [spans[f"t{thread}/{turn}"] for turn in range(TURNS)]
        for earlier, later in itertools.pairwise(ordered):
            assert earlier[1] < later[0], (thread, ordered)
    return {
        "runs": len(ids),
        "attempts": sum(attempts.values()),
        "effects": sum(effects.values()),
        "messages per thread": len(reference),
    }


def test_three_workers_thirty_runs_one_killed_mid_tool_step(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    team: list[WorkerProcess] = []
    with deadline(60):
        url = fresh_database(postgres_cluster.url)
        prepare(url, SCHEMA)
        held = "t4/1"  # a middle turn: the thread's next turn must wait for it
        team = _team(url, tmp_path, hold=held)
        try:
            for worker in team:
                worker.start()
            for worker in team:
                worker.wait_serving()
            ids = _enqueue_all(url)
            (key, executor, pid), *_ = wait_until(
                lambda: rows(url, "SELECT key, executor, pid FROM proof.inflight"),
                30,
                "the held tool step to be in flight",
            )
            victim = next(worker for worker in team if worker.pid == pid)
            assert victim.executor_id == executor
            victim.kill()
            killed_at = time.monotonic()
            wait_until(
                lambda: all(statuses(url).get(i) == "SUCCESS" for i in ids),
                45,
                "every run to succeed",
            )
            figures = _check_everything(url, ids)
        finally:
            for worker in team:
                worker.stop()
    survivors = [worker for worker in team if worker is not victim]
    winners = [w for w in survivors if w.count(f"worker {victim.executor_id} .* resumed its")]
    assert len(winners) == 1, [w.output()[-2000:] for w in survivors]
    held_attempts = rows(url, "SELECT executor FROM proof.attempts WHERE key = %s ORDER BY at", key)
    assert [e for (e,) in held_attempts][0] == victim.executor_id and len(held_attempts) == 2
    print(
        f"proof: {figures}; killed {victim.executor_id} in {key}, recovered by "
        f"{winners[0].executor_id}; all done {time.monotonic() - killed_at:.1f} s after the "
        f"kill, {time.monotonic() - started:.1f} s in all"
    )


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_runs_survive_a_postgres_restart_mid_run(
    postgres_cluster: Cluster, tmp_path: Path, transport: str
) -> None:
    # A cluster of its own, to stop and start, reached over TCP as other hosts reach it or
    # over its Unix socket; the session's (requested so that a missing PostgreSQL fails in CI)
    # serves the other tests.
    clusters: Iterator[Cluster] = start_cluster(tcp=transport == "tcp")
    cluster = next(clusters)
    team: list[WorkerProcess] = []
    try:
        with deadline(90):
            url = fresh_database(cluster.url)
            prepare(url, SCHEMA)
            team = _team(url, tmp_path)
            for worker in team:
                worker.env["ROBOZ_TEST_STEP_SECONDS"] = "0.15"
                worker.start()
            for worker in team:
                worker.wait_serving()
            ids = _enqueue_all(url)
            wait_until(
                lambda: len(rows(url, "SELECT 1 FROM proof.effects")) >= 10, 30, "some effects"
            )
            cluster.stop()
            time.sleep(3)  # longer than the staleness period: nobody may be declared dead
            cluster.start()
            wait_until(
                lambda: all(statuses(url).get(i) == "SUCCESS" for i in ids),
                60,
                "every run to succeed",
            )
            figures = _check_everything(url, ids)
        for worker in team:
            assert worker.count("PostgreSQL is back after") == 1
            assert worker.count("resumed its") == 0
        print(f"postgres restart: {figures}")
    finally:
        for worker in team:
            worker.stop()
        clusters.close()


from tests.durable.proof_app import SCHEMA  # noqa: E402  (imports roboz.durable: after the skip)
