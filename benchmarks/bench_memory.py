"""Persisted runs: a self-chained run persisted vs in memory (beside a whole-file JSON rewrite
per message, the public anchor's pattern), and the time from resuming a long thread to its
first LLM call."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import baselines
from roboz import Agent, AgentMode, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Role, Stop
from roboz.threads import AgentRole, RunRow, SQLiteThreadStore
from roboz.threads.record import new_thread_id
from roboz.tools import stop

STEPS = 2000
LONG_THREAD = 10_000


def _chain_agent(store: SQLiteThreadStore | None, steps: int) -> Agent:
    @tool
    def start(input: Empty, messages: list[Message]) -> Int:
        """Start counting."""
        return Int(value=0)

    @tool(chained_to=["start", "tick"], chain_condition=lambda x: x.value < steps)
    def tick(input: Int, messages: list[Message]) -> Int:
        """Count one up."""
        return Int(value=input.value + 1)

    @tool(chained_to=tick, chain_condition=lambda x: x.value >= steps)
    def done(input: Int, messages: list[Message]) -> Stop:
        """Stop at the end."""
        return Stop(value=input.value)

    return Agent(
        name="chain",
        mode=AgentMode.DETERMINISTIC,
        default_tools=[start],
        tools=[tick, done],
        max_steps=steps + 10,
        store=store,
    )


def _best(func: object, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()  # type: ignore[operator]
        timings.append(time.perf_counter() - started)
    return min(timings)


def _cpu_best(func: Callable[[], object], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.process_time()
        func()
        timings.append(time.process_time() - started)
    return min(timings)


def persisted_vs_memory(directory: Path, steps: int, repeats: int) -> None:
    memory = _chain_agent(None, steps)
    with SQLiteThreadStore(directory / "bench.db") as store:
        persisted = _chain_agent(store, steps)
        _, messages = persisted.invoke()
        thread = store.get_thread(persisted.thread_id or "")
        assert len(thread.messages) == len(messages)
        sizes = store.rows_after(persisted.thread_id or "", -1)
        row_bytes = round(sum(len(r.content) + len(r.extras or "") for r in sizes) / len(sizes))
        memory_s = _best(memory.invoke, repeats)
        persisted_s = _best(persisted.invoke, repeats)
        # CPU time for the per-message figure: a commit without fsync (WAL, synchronous
        # NORMAL) is CPU work, in the process and the kernel, and CPU time is not stretched
        # by other processes on a shared machine.
        memory_cpu = _cpu_best(memory.invoke, repeats)
        persisted_cpu = _cpu_best(persisted.invoke, repeats)
        # Where the rest goes: the same rows through the store's append alone, one after
        # another (no agent, no encoding between commits, as the floor runs).
        stored = [RunRow(AgentRole(r.role), r.content, r.extras or "") for r in sizes]

        def appends_alone() -> None:
            lease, _, _ = store.open_run(
                new_thread_id(), org_id="bench", created_by="bench", created_from_agent_id=None
            )
            for row in stored:
                store.append_run_message(lease, row)
            store.close_run(lease)

        store_cpu = _cpu_best(appends_alone, repeats)
    count = len(messages)

    def bare() -> float:
        path = directory / f"bare-{time.monotonic_ns()}.db"
        started = time.process_time()
        baselines.bare_insert_commit(path, "x" * row_bytes, count)
        return time.process_time() - started

    bare_cpu = min(bare() for _ in range(repeats))
    per_message = (persisted_cpu - memory_cpu) / count
    floor = bare_cpu / count
    ratio = per_message / floor
    _, conversation = memory.invoke()
    anchor = directory / "anchor.json"

    def whole_file_rewrite() -> None:
        # The anchor writes the growing conversation as one JSON file after every message.
        written: list[dict[str, object]] = []
        for message in conversation:
            written.append(message.model_dump(mode="json"))
            anchor.write_text(json.dumps(written))

    anchor_s = _best(whole_file_rewrite, 1)
    print(
        f"{steps}-step self-chained run: in memory {memory_s * 1000:.0f} ms, persisted "
        f"(SQLite, one row per message) {persisted_s * 1000:.0f} ms, ratio "
        f"{persisted_s / memory_s:.2f}x"
    )
    print(
        f"persistence per message (persisted minus in memory, CPU): {per_message * 1e6:.1f} µs "
        f"vs a bare one-row WAL insert+commit of the same {row_bytes} bytes "
        f"(baselines.bare_insert_commit) {floor * 1e6:.1f} µs, ratio {ratio:.2f}x, goal <= 1.5x "
        f"{'met' if ratio <= 1.5 else 'NOT met'}"
    )
    print(
        f"  of which the store's append alone (the same rows back to back, no agent between "
        f"commits): {store_cpu / count * 1e6:.1f} µs, {store_cpu / bare_cpu:.2f}x the floor"
    )
    print(
        f"  for scale, whole-file JSON rewrite per message (the anchor's pattern, writing "
        f"only): {anchor_s * 1000:.0f} ms, {anchor_s / persisted_s:.1f}x the persisted run"
    )


def resume_to_first_llm_call(directory: Path, size: int, repeats: int) -> None:
    path = directory / "long.db"
    with SQLiteThreadStore(path) as store:
        seeder = Agent(
            name="long",
            agent_endpoint=MockLLMEndpoint([{"action": "stop", "value": "seeded"}]),
            tools=[stop],
            initial_messages=[
                Message(role=Role.USER if i % 2 == 0 else Role.ASSISTANT, content=f"m {i} " * 8)
                for i in range(size)
            ],
            store=store,
        )
        seeder.invoke(thread_id="long")
    reached: list[float] = []

    class FirstCall(MockLLMEndpoint):
        def complete(self, records, *, on_delta=None, cancel=None):  # type: ignore[no-untyped-def,override]
            reached.append(time.perf_counter())
            return super().complete(records, on_delta=on_delta, cancel=cancel)

    timings = []
    for _ in range(repeats):
        reached.clear()
        with SQLiteThreadStore(path) as store:
            agent = Agent(
                name="long",
                agent_endpoint=FirstCall(
                    [{"action": "stop", "value": "again"}], keep_requests=False
                ),
                tools=[stop],
                store=store,
            )
            started = time.perf_counter()
            agent.invoke(thread_id="long")
        timings.append(reached[0] - started)
    best = min(timings)
    print(
        f"resume a {size:,}-message thread: {best * 1000:.0f} ms to the first LLM call "
        "(target < 100 ms)"
    )


def compaction_check_cost(sizes: tuple[int, ...], calls: int) -> None:
    from roboz.shed.tools.compaction import Compactor

    figures = []
    for size in sizes:
        compactor = Compactor(endpoint=MockLLMEndpoint([]), max_context_tokens=10**9)
        check = compactor.tool()
        messages = [Message(role=Role.USER, content="x" * 40) for _ in range(size)]
        check.run(Empty(), messages)  # a run's first check counts what is already there
        started = time.perf_counter()
        for _ in range(calls):
            messages.append(Message(role=Role.TOOL, content="y" * 40))
            check.run(Empty(), messages)
        figures.append((size, (time.perf_counter() - started) / calls * 1e6))
    small, large = figures[0], figures[-1]
    print(
        f"compaction check before an LLM call: {small[1]:.1f} µs at {small[0]:,} messages, "
        f"{large[1]:.1f} µs at {large[0]:,} (ratio {large[1] / small[1]:.2f}x; O(1) means ~1x)"
    )


def main(quick: bool = False) -> int:
    with tempfile.TemporaryDirectory() as directory:
        persisted_vs_memory(Path(directory), STEPS, 2 if quick else 5)
        resume_to_first_llm_call(Path(directory), LONG_THREAD, 2 if quick else 5)
    compaction_check_cost((100, 10_000), 200 if quick else 2000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
