"""Durable turns (roboz.durable on DBOS) beside the same turns in memory.

One turn is ``STEPS`` rounds of an LLM call choosing a tool and the tool's call, then a stop.
Figures are per round, in the same process on the same machine:

- in memory: ``Agent.invoke`` (no thread store);
- durable: the turn as a DBOS workflow on a worker (an LLM step, a write of the thread's new
  rows and a tool step per round);
- durable with ``progress=False``: the thread written once at the end of the turn instead of
  before each tool call (an LLM step and a tool step per round);
- durable with the tool declared ``pure``: no tool step and no write before it, the rows go
  with the next write; the difference is what a pure tool saves per call;
- an empty DBOS step, DBOS's own cost per recorded step.

The worker is launched in a child process (DBOS is one runtime per process), against a
throwaway PostgreSQL cluster on a Unix socket with fsync off, as in the tests; turns are
called directly as workflows, so queue polling is not in the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from roboz import Agent, tool
from roboz.llm import FunctionEndpoint, ProviderRecord
from roboz.models import Empty, Message
from roboz.tools import stop

ROOT = Path(__file__).resolve().parents[1]


class Round(Empty):
    n: int


@tool
def work(input: Round, messages: list[Message]) -> Round:
    """Do round n."""
    return Round(n=input.n + 1)


@tool(name="work", pure=True)
def pure_work(input: Round, messages: list[Message]) -> Round:
    """Do round n."""
    return Round(n=input.n + 1)


def _reply_for(steps: int) -> FunctionEndpoint:
    def reply(records: list[ProviderRecord]) -> dict[str, object]:
        done = sum(1 for r in records if r["content"].startswith("[work result]"))
        if done < steps:
            return {"action": "work", "n": done}
        return {"action": "stop", "value": done}

    return FunctionEndpoint(reply)


def agents(steps: int) -> tuple[Agent, Agent]:
    plain = Agent(name="plain", agent_endpoint=_reply_for(steps), tools=[work, stop])
    pure = Agent(name="pure", agent_endpoint=_reply_for(steps), tools=[pure_work, stop])
    return plain, pure


def _child(url: str, steps: int, reps: int) -> None:
    """In the worker process: time the turns and print the figures as JSON."""
    from dbos import DBOS, SetWorkflowID

    from roboz.durable import DurableRuns, workflow
    from roboz.durable.workflow import run_turn

    plain, pure = agents(steps)
    started = time.perf_counter()
    for _ in range(reps * 5):
        result, _ = plain.invoke([Message(role="user", content="go")])
        assert result.value == steps
    memory = (time.perf_counter() - started) / (reps * 5 * steps)

    @DBOS.workflow(name="bench.empty")
    def empty_steps(count: int) -> None:
        for _ in range(count):
            DBOS.run_step({"name": "bench.noop"}, lambda: None)

    runs = DurableRuns(url, agents=[plain, pure])
    runs.launch(executor_id="bench:0")
    try:
        figures: dict[str, float] = {"memory": memory}
        for label, name, progress in (
            ("plain", "plain", True),
            ("at_end", "plain", False),
            ("pure", "pure", True),
        ):
            assert workflow._host is not None
            workflow._host.progress = progress  # as DurableRuns(progress=...) sets it
            with SetWorkflowID(f"warm-{label}/0"):
                run_turn(name, "go", f"warm-{label}")
            started = time.perf_counter()
            for i in range(reps):
                with SetWorkflowID(f"{label}{i}/1"):
                    assert run_turn(name, "go", f"{label}{i}").output.value == steps
            figures[label] = (time.perf_counter() - started) / (reps * steps)
        count = steps * reps * 3
        with SetWorkflowID("empty/0"):
            empty_steps(10)
        started = time.perf_counter()
        with SetWorkflowID("empty/1"):
            empty_steps(count)
        figures["empty"] = (time.perf_counter() - started) / count
    finally:
        runs.shutdown()
    print(json.dumps(figures), flush=True)


def main(quick: bool = False) -> None:
    try:
        from tests.postgres import find_bindir, start_cluster
    except ImportError:
        print("skipped: run from a clone (the cluster helper lives in tests/postgres.py)")
        return
    if find_bindir() is None:
        print("skipped: PostgreSQL is not installed (apt-get install postgresql)")
        return
    import psycopg

    from roboz.durable import migrate

    steps, reps = (5, 2) if quick else (20, 5)
    clusters = start_cluster()
    cluster = next(clusters)
    try:
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        url = cluster.url.replace("dbname=postgres", "dbname=bench")
        migrate(url)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_durable",
                "--child",
                url,
                str(steps),
                str(reps),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        clusters.close()
    if done.returncode != 0:
        raise RuntimeError(f"the durable worker failed: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    memory, plain, at_end, pure, empty = (
        figures[k] for k in ("memory", "plain", "at_end", "pure", "empty")
    )
    print(f"{steps} rounds of LLM call + tool call per turn, {reps} turns")
    print(
        f"per round: in memory {memory * 1e3:.3f} ms, durable {plain * 1e3:.2f} ms "
        f"({plain / memory:.0f}x the in-memory round)"
    )
    print(
        f"per round, thread written at the end only (progress=False): durable "
        f"{at_end * 1e3:.2f} ms ({at_end / memory:.0f}x)"
    )
    print(
        f"per round with a pure tool: durable {pure * 1e3:.2f} ms; a pure tool saves "
        f"{(plain - pure) * 1e3:.2f} ms per call ({(plain - pure) / plain:.0%} of a durable round)"
    )
    print(f"empty DBOS step: {empty * 1e3:.2f} ms")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main(quick="--quick" in sys.argv)
