"""Durable turns (roboz.durable on DBOS) beside the same turns in memory and empty DBOS steps.

One turn is ``STEPS`` rounds of an LLM call choosing a tool and the tool's call, then a stop.
Figures are per round, in the same process on the same machine:

- in memory: ``Agent.invoke`` (no thread store);
- durable: the turn as a DBOS workflow on a worker (per round an LLM step and a tool step,
  which first writes the thread's new rows: ``roboz.durable.step_writes``);
- before: the same, with the progress write a recorded step of its own (a DBOS datasource
  transaction) before each tool step, as the driver did until issue 31;
- durable with ``progress=False``: the thread written once at the end of the turn instead of
  in each tool step;
- durable with the tool declared ``pure``: no tool step, the rows go with the next write;
- the baseline: two empty DBOS steps (``DBOS.run_step`` of a function doing nothing), DBOS's
  own cost for the two records a round cannot do without.

Three figures per kind, each against two empty steps: the whole turn divided by its rounds
(the turn's first and last transactions, which read and end the thread, spread over its
rounds); the steady state, between the turn's first and last LLM call, timed inside the
steps (likewise for the empty steps), which is what each further round costs; and the CPU
the whole turn used, in this process and in the server (wall time on a loaded machine also
waits for a CPU at each round trip, CPU time much less so). The machine is shared, so each
repetition times one turn of each kind and the empty steps back to back, and ratios are
taken within a repetition before the median: a burst of load from elsewhere weighs on both
sides alike.

The worker is launched in a child process (DBOS is one runtime per process), against a
throwaway PostgreSQL cluster on a Unix socket with fsync off, as in the tests; turns are
called directly as workflows, so queue polling is not in the figures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roboz import Agent, tool
from roboz.llm import FunctionEndpoint, ProviderRecord
from roboz.models import Empty, Message
from roboz.tools import stop

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.3
"""A durable round against two empty DBOS steps (issue 31)."""


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


class _Scripted(FunctionEndpoint):
    """The scripted LLM; notes when each call is made (inside its step)."""

    def __init__(self, steps: int) -> None:
        super().__init__(self._reply)
        self.steps = steps
        self.at: list[float] = []

    def _reply(self, records: list[ProviderRecord]) -> dict[str, object]:
        self.at.append(time.perf_counter())
        done = sum(1 for r in records if r["content"].startswith("[work result]"))
        if done < self.steps:
            return {"action": "work", "n": done}
        return {"action": "stop", "value": done}


def agents(steps: int) -> tuple[Agent, Agent]:
    plain = Agent(name="plain", agent_endpoint=_Scripted(steps), tools=[work, stop])
    pure = Agent(name="pure", agent_endpoint=_Scripted(steps), tools=[pure_work, stop])
    return plain, pure


class _Cpu:
    """CPU seconds used so far by this process (every thread) and by the PostgreSQL server
    (the postmaster's children, live or reaped): the cost of a durable step is mostly the
    server's and the client's work, and unlike wall time it does not grow with the load
    others put on the machine."""

    def __init__(self, url: str) -> None:
        import psycopg

        with psycopg.connect(url) as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
            # Read while the connection is open: its backend exits when it closes.
            self.postmaster = int(_stat(backend)[1])
        self._tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        server = sum(int(x) for x in _stat(self.postmaster)[11:15])  # incl. reaped children
        for pid in _children(self.postmaster):
            try:
                server += sum(int(x) for x in _stat(pid)[11:13])
            except OSError:
                continue  # gone meanwhile: counted by the postmaster's reaped time next
        return time.process_time() + server / self._tick


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat from the state field on (index 0 is the state, 1 the parent)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as children:
            found += [int(c) for c in children.read().split()]
    return found


def _recorded_progress(kind: str) -> Callable[[], None]:
    """For ``kind == "recorded"``, the design before: the progress write a recorded step of its
    own (a datasource transaction) before each tool step, where the driver now writes inside
    the step. Returns what undoes it."""
    from roboz.durable.driver import DurableDriver

    original = DurableDriver.call_tool
    if kind != "recorded":
        return lambda: None

    async def call_tool(self: Any, tool: Any, value: Empty, messages: list[Message]) -> Any:
        if not tool.pure and self._progress:
            self._transcript.flush()  # outside any step: recorded
        return await original(self, tool, value, messages)

    DurableDriver.call_tool = call_tool  # type: ignore[method-assign]

    def undo() -> None:
        DurableDriver.call_tool = original  # type: ignore[method-assign]

    return undo


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

    empty_at: list[float] = []

    @DBOS.workflow(name="bench.empty")
    def empty_steps(count: int) -> None:
        for _ in range(count):
            DBOS.run_step({"name": "bench.noop"}, lambda: empty_at.append(time.perf_counter()))

    kinds = (
        ("plain", plain, True),
        ("recorded", plain, True),
        ("at_end", plain, False),
        ("pure", pure, True),
    )
    runs = DurableRuns(url, agents=[plain, pure])
    runs.launch(executor_id="bench:0")
    cpu = _Cpu(url)
    assert workflow._host is not None
    host = workflow._host
    figures: dict[str, list[float]] = {}

    def note(label: str, wall: float, cpu_s: float | None = None) -> None:
        """Per round, or per two empty steps' worth (``steps`` rounds, ``2 * steps`` steps;
        a steady state spans one step or round fewer)."""
        per = 2 * steps if label.startswith("empty") else steps
        per -= label.endswith("_steady") and label.startswith("empty")
        figures.setdefault(label, []).append(wall / per)
        if cpu_s is not None:
            figures.setdefault(label + "_cpu", []).append(cpu_s / per)

    try:
        for i in range(-1, reps):  # -1: a warm-up, not counted
            order = [*kinds, None]  # None: the empty steps
            shift = max(i, 0) % len(order)  # each kind first in turn, none favoured
            for kind in order[shift:] + order[:shift]:
                if kind is None:
                    empty_at.clear()
                    started, cpu_started = time.perf_counter(), cpu()
                    with SetWorkflowID(f"empty{i}/1"):
                        empty_steps(2 * steps)
                    if i >= 0:
                        note("empty", time.perf_counter() - started, cpu() - cpu_started)
                        note("empty_steady", empty_at[-1] - empty_at[0])
                    continue
                label, agent, progress = kind
                host.progress = progress  # as DurableRuns(progress=...) sets it
                at = agent.agent_endpoint.at  # type: ignore[union-attr]
                at.clear()
                undo = _recorded_progress(label)
                started, cpu_started = time.perf_counter(), cpu()
                try:
                    with SetWorkflowID(f"{label}{i}/1"):
                        assert run_turn(agent.name, "go", f"{label}{i}").output.value == steps
                finally:
                    undo()
                if i >= 0:
                    note(label, time.perf_counter() - started, cpu() - cpu_started)
                    note(label + "_steady", at[-1] - at[0])
    finally:
        runs.shutdown()
    print(json.dumps({"memory": memory, **figures}), flush=True)


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

    steps, reps = (5, 2) if quick else (20, 9)
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

    def median(kind: str) -> float:
        return statistics.median(figures[kind])

    def ratio(kind: str, suffix: str = "") -> float:
        """A round against two empty steps of the same repetition, median over repetitions."""
        pairs = zip(figures[kind + suffix], figures["empty" + suffix], strict=True)
        return statistics.median(r / (2 * e) for r, e in pairs)

    plain = median("plain")
    print(f"{steps} rounds of LLM call + tool call per turn, {reps} turns of each kind (medians)")
    print(
        f"per round: in memory {figures['memory'] * 1e3:.3f} ms, durable {plain * 1e3:.2f} ms "
        f"({plain / figures['memory']:.0f}x the in-memory round)"
    )
    print(
        f"empty DBOS step: {median('empty') * 1e3:.2f} ms, {median('empty_steady') * 1e3:.2f} ms "
        "in the steady state"
    )

    def line(kind: str) -> str:
        return (
            f"{median(kind) * 1e3:.2f} ms a round, {ratio(kind):.2f}x two empty steps over the "
            f"whole turn, {ratio(kind, '_steady'):.2f}x in the steady state, "
            f"{ratio(kind, '_cpu'):.2f}x in CPU"
        )

    print(f"durable round: {line('plain')}")
    print(f"before, the progress write a recorded step of its own: {line('recorded')}")
    whole, steady = ratio("plain"), ratio("plain", "_steady")
    print(
        f"goal: a durable round <= {GOAL:g}x two empty DBOS steps: "
        f"{'met' if whole <= GOAL else 'NOT met'} over the whole turn ({whole:.2f}x), "
        f"{'met' if steady <= GOAL else 'NOT met'} in the steady state ({steady:.2f}x)"
    )
    print(f"thread written at the end only (progress=False): {line('at_end')}")
    pure = median("pure")
    print(
        f"pure tool (no tool step): {line('pure')}; a pure tool saves {(plain - pure) * 1e3:.2f} "
        f"ms a call ({(plain - pure) / plain:.0%} of a durable round)"
    )
    print(
        "(CPU: this process's and the server's; wall time on a loaded machine also waits for a "
        "CPU at each round trip)"
    )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main(quick="--quick" in sys.argv)
