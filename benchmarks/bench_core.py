"""Core agent loop: a chained step and an LLM-chosen step against hand-written loops
(``baselines``), ainvoke against invoke, many concurrent agents, LLM calls saved, import
time."""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import baselines
from roboz import Agent, AgentMode, tool
from roboz.agent.run import Scheduler
from roboz.agent.transcript import MemoryTranscript
from roboz.llm import Completion, MockLLMEndpoint, ProviderRecord
from roboz.llm.endpoint import DeltaCallback
from roboz.models import Empty, Int, Message, Stop, Str
from roboz.tools import Tool, stop

STEPS = 200


def start(input: Empty, messages: list[Message]) -> Int:
    """Start counting."""
    return Int(value=0)


def tick(input: Int, messages: list[Message]) -> Int:
    """Count one up."""
    return Int(value=input.value + 1)


def done(input: Int, messages: list[Message]) -> Stop:
    """Stop at the end."""
    return Stop(value=input.value)


def _chain_agent(asynchronous: bool = False) -> Agent:
    start_tool, tick_tool, done_tool = (
        tool(_as_async(f) if asynchronous else f) for f in (start, tick, done)
    )
    tick_tool.chain(chained_to=["start", "tick"], chain_condition=lambda x: x.value < STEPS)
    done_tool.chain(chained_to=tick_tool, chain_condition=lambda x: x.value >= STEPS)
    return _deterministic(start_tool, tick_tool, done_tool)


def _deterministic(start: Tool, tick: Tool, done: Tool) -> Agent:
    return Agent(
        name="chain", mode=AgentMode.DETERMINISTIC, default_tools=[start], tools=[tick, done]
    )


def _as_async(func: Callable[[Any, list[Message]], object]) -> Callable[..., object]:
    async def wrapper(input: object, messages: list[Message]) -> object:
        return func(input, messages)

    wrapper.__name__ = func.__name__  # type: ignore[attr-defined]
    wrapper.__doc__ = func.__doc__
    wrapper.__annotations__ = func.__annotations__
    return wrapper


def _best_of(func: object, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()  # type: ignore[operator]
        timings.append(time.perf_counter() - started)
    return min(timings)


def _cpu_best_of(func: Callable[[], object], repeats: int) -> float:
    """Least CPU seconds of ``repeats`` calls: the loop figures are pure computation, and CPU
    time is not stretched by other processes taking turns on a shared machine."""
    timings = []
    for _ in range(repeats):
        started = time.process_time()
        func()
        timings.append(time.process_time() - started)
    return min(timings)


def _goal(ratio: float, goal: float) -> str:
    return f"goal <= {goal:g}x {'met' if ratio <= goal else 'NOT met'}"


def chained_step_overhead(repeats: int) -> None:
    agent = _chain_agent()
    result, messages = agent.invoke()
    assert result.value == STEPS and len(messages) == STEPS + 2
    assert len(baselines.chained_loop(start, tick, done, STEPS)) == STEPS + 2
    agent_s = _cpu_best_of(agent.invoke, repeats)
    plain_s = _cpu_best_of(lambda: baselines.chained_loop(start, tick, done, STEPS), repeats)
    per_step = agent_s / (STEPS + 2) * 1e6
    plain_step = plain_s / (STEPS + 2) * 1e6
    ratio = per_step / plain_step
    print(
        f"chained step: {per_step:.1f} µs/step through the agent, {plain_step:.1f} µs/step "
        f"hand-written loop (baselines.chained_loop), ratio {ratio:.2f}x, {_goal(ratio, 1.5)}"
    )


def _best_of_async(make: Callable[[], object], repeats: int) -> float:
    async def timed() -> float:
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            await make()  # type: ignore[misc]
            timings.append(time.perf_counter() - started)
        return min(timings)

    return asyncio.run(timed())


def step(input: Empty, messages: list[Message]) -> Str:
    """One step."""
    return Str(value="ok")


def _llm_replies(rounds: int) -> list[object]:
    return [
        *([{"action": "step", "rationale": "next"}] * rounds),
        {"action": "stop", "value": "done"},
    ]


def _mock(rounds: int) -> MockLLMEndpoint:
    # The mock keeps no request copies and skips its token estimate (which reads the whole
    # prompt, as a provider would): what is measured is the agent loop's own cost per step.
    return MockLLMEndpoint(_llm_replies(rounds), keep_requests=False, estimate_usage=False)  # type: ignore[arg-type]


def _llm_agent(asynchronous: bool, rounds: int = STEPS) -> Agent:
    return Agent(
        name="llm",
        agent_endpoint=_mock(rounds),
        tools=[tool(_as_async(step) if asynchronous else step), stop],
        max_steps=10 * rounds,
    )


def ainvoke_overhead(repeats: int) -> None:
    """Per step, ainvoke on a running loop against invoke, each with its own kind of tool."""
    sync_s = _best_of(lambda: _chain_agent().invoke(), repeats)
    native_s = _best_of_async(lambda: _chain_agent(asynchronous=True).ainvoke(), repeats)
    mixed_s = _best_of_async(lambda: _chain_agent().ainvoke(), max(1, repeats // 3))
    per = 1e6 / (STEPS + 2)
    print(
        f"ainvoke, chained steps: {native_s * per:.1f} µs/step with async tools vs invoke "
        f"{sync_s * per:.1f} µs/step with sync tools, ratio {native_s / sync_s:.2f}x "
        f"(target <= 1.2x); sync tools from ainvoke (a worker thread each) "
        f"{mixed_s * per:.1f} µs/step"
    )
    llm_sync = _best_of(lambda: _llm_agent(False).invoke(), repeats)
    llm_async = _best_of_async(lambda: _llm_agent(True).ainvoke(), repeats)
    per = 1e6 / (2 * STEPS + 2)
    print(
        f"ainvoke, LLM-chosen steps: {llm_async * per:.1f} µs/step vs invoke "
        f"{llm_sync * per:.1f} µs/step, ratio {llm_async / llm_sync:.2f}x (target <= 1.2x)"
    )


AGENTS = 200
AGENT_STEPS = 20
LATENCY_S = 0.02


class _SlowMock(MockLLMEndpoint):
    """The scripted mock with a provider's latency: slept by invoke, awaited by ainvoke."""

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        time.sleep(LATENCY_S)
        return super().complete(records, on_delta=on_delta, cancel=cancel)

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        await asyncio.sleep(LATENCY_S)
        return MockLLMEndpoint.complete(self, records, on_delta=on_delta, cancel=cancel)


def _fleet(asynchronous: bool) -> list[Agent]:
    def work(input: Empty, messages: list[Message]) -> Str:
        """One step of work."""
        return Str(value="ok")

    work_tool = tool(_as_async(work) if asynchronous else work)
    replies: list[object] = [{"action": "work", "rationale": "next"}] * (AGENT_STEPS - 1)
    replies.append({"action": "stop", "value": "done"})
    return [
        Agent(
            name=f"agent{index}",
            agent_endpoint=_SlowMock(replies, keep_requests=False),  # type: ignore[arg-type]
            tools=[work_tool, stop],
        )
        for index in range(AGENTS)
    ]


def concurrent_child(mode: str) -> None:
    """Run in a fresh process (so peak RSS is this mode's own): print seconds and RSS."""
    agents = _fleet(asynchronous=mode == "loop")
    idle_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if mode == "loop":

        async def everyone() -> None:
            await asyncio.gather(*(agent.ainvoke() for agent in agents))

        asyncio.run(everyone())
    else:
        threads = [threading.Thread(target=agent.invoke) for agent in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    elapsed = time.perf_counter() - started
    assert all(agent.messages[-1].caller == "stop" for agent in agents)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": elapsed, "peak_kib": peak_kib, "idle_kib": idle_kib}))


def many_concurrent_agents() -> None:
    results = {}
    for mode in ("loop", "threads"):
        code = f"from benchmarks.bench_core import concurrent_child; concurrent_child({mode!r})"
        output = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout
        results[mode] = json.loads(output.strip().splitlines()[-1])
    steps = AGENTS * AGENT_STEPS
    loop, threads = results["loop"], results["threads"]
    print(
        f"{AGENTS} agents x {AGENT_STEPS} LLM steps ({LATENCY_S * 1000:.0f} ms mock latency): "
        f"ainvoke on one loop {steps / loop['seconds']:.0f} steps/s, peak RSS "
        f"{loop['peak_kib'] / 1024:.0f} MiB (+{(loop['peak_kib'] - loop['idle_kib']) / 1024:.0f} "
        f"over idle); invoke in {AGENTS} threads {steps / threads['seconds']:.0f} steps/s, "
        f"peak RSS {threads['peak_kib'] / 1024:.0f} MiB "
        f"(+{(threads['peak_kib'] - threads['idle_kib']) / 1024:.0f}); "
        f"latency bound {AGENTS / LATENCY_S:.0f} steps/s"
    )


def llm_loop(repeats: int) -> None:
    """An LLM-chosen step (one LLM call and one tool call) against the hand-written loop, and
    its cost at 200 steps against 20 (a per-step cost growing with the conversation would
    show there)."""
    agent = _llm_agent(False)
    system = Scheduler(agent.run_spec(), MemoryTranscript([])).system_prompt()
    hand = baselines.llm_loop(_mock(STEPS), system, step, Empty, STEPS)
    _, messages = _llm_agent(False).invoke()
    results = [m.content for m in messages if m.caller == "step"]
    assert len(hand) == len(messages) - 1 and results == [m.content for m in hand[1::2]]

    def through_agent(rounds: int) -> float:
        agents = iter([_llm_agent(False, rounds) for _ in range(repeats)])
        return _cpu_best_of(lambda: next(agents).invoke(), repeats) / (rounds + 1)

    def by_hand() -> float:
        mocks = iter([_mock(STEPS) for _ in range(repeats)])
        loop = baselines.llm_loop
        return _cpu_best_of(lambda: loop(next(mocks), system, step, Empty, STEPS), repeats)

    long_s = through_agent(STEPS)
    short_s = through_agent(20)
    hand_s = by_hand() / (STEPS + 1)
    ratio = long_s / hand_s
    growth = long_s / short_s
    print(
        f"LLM loop: {long_s * 1e6:.1f} µs per LLM-chosen step (the call and the tool) through "
        f"the agent, {hand_s * 1e6:.1f} µs hand-written (baselines.llm_loop), ratio "
        f"{ratio:.2f}x, {_goal(ratio, 3)}; a run of {STEPS} steps {long_s * 1e6:.1f} µs/step "
        f"vs of 20 steps {short_s * 1e6:.1f} µs/step, ratio {growth:.2f}x, {_goal(growth, 1.1)}"
    )


def lunch_with_bob() -> None:
    class Lunch(Str):
        pass

    @tool
    def ask_bob(input: Empty, messages: list[Message]) -> Str:
        """Ask Bob whether he wants lunch."""
        return Str(value="yes, pizza")

    @tool(chained_to=ask_bob, chain_condition=lambda x: x.value.startswith("yes"))
    def find_restaurant(input: Str, messages: list[Message]) -> Str:
        """Find a restaurant for what Bob wants."""
        return Str(value="Luigi's")

    @tool(chained_to=find_restaurant)
    def book_table(input: Str, messages: list[Message]) -> Stop:
        """Book a table."""
        return Stop(value=f"booked {input.value}")

    chained = MockLLMEndpoint([{"action": "ask_bob"}])
    Agent(name="bob", agent_endpoint=chained, tools=[ask_bob, find_restaurant, book_table]).invoke()

    @tool(name="find_restaurant")
    def find_free(input: Empty, messages: list[Message]) -> Str:
        """Find a restaurant."""
        return Str(value="Luigi's")

    @tool(name="book_table")
    def book_free(input: Empty, messages: list[Message]) -> Stop:
        """Book a table."""
        return Stop(value="booked")

    unchained = MockLLMEndpoint(
        [{"action": "ask_bob"}, {"action": "find_restaurant"}, {"action": "book_table"}]
    )
    Agent(name="bob", agent_endpoint=unchained, tools=[ask_bob, find_free, book_free]).invoke()
    print(
        f"lunch with Bob: {chained.calls} LLM call(s) chained, {unchained.calls} unchained "
        f"({unchained.calls - chained.calls} saved)"
    )


def import_time(repeats: int) -> None:
    def timed(code: str) -> float:
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            runs.append(time.perf_counter() - started)
        return statistics.median(runs) * 1000

    bare = timed("pass")
    whole = timed("import roboz")
    agent = timed("from roboz import Agent")
    pydantic = timed("import pydantic; from pydantic import BaseModel")
    print(
        f"import: bare interpreter {bare:.0f} ms, `import roboz` {whole:.0f} ms, "
        f"`from roboz import Agent` {agent:.0f} ms, pydantic alone {pydantic:.0f} ms"
    )


def main(quick: bool = False) -> None:
    chained_step_overhead(3 if quick else 15)
    ainvoke_overhead(3 if quick else 15)
    many_concurrent_agents()
    llm_loop(3 if quick else 15)
    lunch_with_bob()
    import_time(3 if quick else 9)


if __name__ == "__main__":
    main()
