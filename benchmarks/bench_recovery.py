"""Time from a worker's death to its runs resuming, median over several SIGKILLs.

Two ``roboz worker`` processes serve a plain DBOS app (tests/durable/plain_app.py); each round
queues one run whose first step hangs on its first attempt, kills the worker running it, and
times until the step starts again on the survivor. That time is the staleness period plus up
to one heartbeat interval (when the survivor next looks) plus the queue's polling; both
settings are printed beside it. The baseline is DBOS's own recovery: the killed worker
restarted at once under the same executor id, which resumes its runs as it launches (the
time then is mostly the process starting).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

INTERVAL_S, STALE_S = 0.25, 2.0


def _resumed_after_kill(url: str, team: list[object], run_id: str, restart_same_id: bool) -> float:
    from tests.durable.workers_support import WorkerProcess, enqueue_plain, rows, wait_until

    workers = [w for w in team if isinstance(w, WorkerProcess)]
    enqueue_plain(url, [run_id], 1)
    key = f"{run_id}:1"
    (pid,) = wait_until(
        lambda: rows(url, "SELECT pid FROM proof.inflight WHERE run_id = %s", run_id),
        30,
        "the held step",
        poll_s=0.01,
    )[0]
    victim = next(w for w in workers if w.pid == pid)
    killed = time.monotonic()
    victim.kill()
    if restart_same_id:
        victim.start()
    wait_until(
        lambda: rows(url, "SELECT count(*) FROM proof.attempts WHERE key = %s", key)[0][0] >= 2,
        60,
        "the step to run again",
        poll_s=0.01,
    )
    resumed = time.monotonic() - killed
    wait_until(
        lambda: (
            rows(url, "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", run_id)
            == [("SUCCESS",)]
        ),
        60,
        "the run to finish",
    )
    if not restart_same_id:
        victim.start()
    victim.wait_serving()
    # A worker judges others only after a staleness period connected: let the restarted one
    # settle, as in a fleet that has been up for a while.
    time.sleep(STALE_S)
    return resumed


def main(quick: bool = False) -> None:
    try:
        from tests.durable.plain_app import SCHEMA
        from tests.durable.workers_support import WorkerProcess, fresh_database, prepare
        from tests.postgres import find_bindir, start_cluster
    except ImportError as error:
        print(f"skipped: run from a clone with roboz[durable] installed ({error})")
        return
    if find_bindir() is None:
        print("skipped: PostgreSQL is not installed (apt-get install postgresql)")
        return
    rounds = 2 if quick else 5
    options = ("--heartbeat-interval", str(INTERVAL_S), "--stale-after", str(STALE_S))
    clusters = start_cluster()
    cluster = next(clusters)
    team: list[WorkerProcess] = []
    try:
        url = fresh_database(cluster.url)
        prepare(url, SCHEMA)
        holds = ",".join(f"{kind}{i}" for kind in ("dead", "same") for i in range(rounds))
        with tempfile.TemporaryDirectory(prefix="roboz-bench-recovery-") as logs:
            team = [
                WorkerProcess(
                    url,
                    name,
                    Path(logs) / f"{name}.log",
                    options=options,
                    env={"ROBOZ_TEST_HOLD": holds},
                )
                for name in ("a", "b")
            ]
            for worker in team:
                worker.start()
            for worker in team:
                worker.wait_serving()
            by_others = [
                _resumed_after_kill(url, list(team), f"dead{i}", False) for i in range(rounds)
            ]
            by_itself = [
                _resumed_after_kill(url, list(team), f"same{i}", True) for i in range(rounds)
            ]
    finally:
        for worker in team:
            worker.stop()
        clusters.close()
    others, itself = statistics.median(by_others), statistics.median(by_itself)
    print(
        f"heartbeat every {INTERVAL_S:g} s, a worker counts as dead after {STALE_S:g} s of silence"
    )
    print(
        f"death to resumption by another worker: median {others:.2f} s over {rounds} kills "
        f"(min {min(by_others):.2f}, max {max(by_others):.2f}; expected: staleness + up to one "
        f"interval + queue polling, {STALE_S:g}-{STALE_S + INTERVAL_S + 0.1:.2f} s)"
    )
    print(
        f"death to resumption by a restart under the same executor id: median {itself:.2f} s "
        f"(recovery by another worker took {others / itself:.1f}x as long; a restart needs the "
        "host back, recovery by another does not)"
    )


if __name__ == "__main__":
    main()
