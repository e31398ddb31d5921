"""Core agent loop: chained step overhead, LLM-loop flatness, LLM calls saved, import time."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import time

from roboz import Agent, AgentMode, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Role, Stop, Str
from roboz.tools import stop

STEPS = 200


def _chain_agent() -> Agent:
    @tool
    def start(input: Empty, messages: list[Message]) -> Int:
        """Start counting."""
        return Int(value=0)

    @tool(chained_to=["start", "tick"], chain_condition=lambda x: x.value < STEPS)
    def tick(input: Int, messages: list[Message]) -> Int:
        """Count one up."""
        return Int(value=input.value + 1)

    @tool(chained_to=tick, chain_condition=lambda x: x.value >= STEPS)
    def done(input: Int, messages: list[Message]) -> Stop:
        """Stop at the end."""
        return Stop(value=input.value)

    return Agent(
        name="chain", mode=AgentMode.DETERMINISTIC, default_tools=[start], tools=[tick, done]
    )


def _plain_loop() -> None:
    # The same validated models and message records, with no agent around them.
    messages: list[Message] = []
    value = Int(value=0)
    for _ in range(STEPS):
        value = Int.model_validate({"value": value.value + 1})
        messages.append(Message(role=Role.TOOL, content=value.model_dump_json(), caller="tick"))


def _best_of(func: object, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()  # type: ignore[operator]
        timings.append(time.perf_counter() - started)
    return min(timings)


def chained_step_overhead(repeats: int) -> None:
    agent = _chain_agent()
    result, messages = agent.invoke()
    assert result.value == STEPS and len(messages) == STEPS + 2
    agent_s = _best_of(agent.invoke, repeats)
    plain_s = _best_of(_plain_loop, repeats)
    per_step = agent_s / (STEPS + 2) * 1e6
    plain_step = plain_s / STEPS * 1e6
    print(
        f"chained step: {per_step:.1f} µs/step through the agent, {plain_step:.1f} µs/step "
        f"plain validated loop, ratio {per_step / plain_step:.2f}x (target <= 40 µs/step)"
    )


def llm_loop_flatness() -> None:
    @tool
    def step(input: Empty, messages: list[Message]) -> Str:
        """One step."""
        return Str(value="ok")

    replies: list[object] = [{"action": "step", "rationale": "next"}] * STEPS
    replies.append({"action": "stop", "value": "done"})
    # The mock keeps no request copies and skips its token estimate (which reads the whole
    # prompt, as a provider would): what is measured is the agent loop's own cost per step.
    endpoint = MockLLMEndpoint(replies, keep_requests=False, estimate_usage=False)  # type: ignore[arg-type]
    stamps: list[float] = []
    agent = Agent(
        name="llm",
        agent_endpoint=endpoint,
        tools=[step, stop],
        event_sinks=[
            lambda event: (
                stamps.append(time.perf_counter()) if type(event).__name__ == "LLMReplied" else None
            )
        ],
        max_steps=10 * STEPS,
    )
    agent.invoke()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    early = statistics.median(gaps[:50]) * 1e6
    late = statistics.median(gaps[150:200]) * 1e6
    print(
        f"LLM loop: median {early:.1f} µs/step for steps 1-50, {late:.1f} µs/step for "
        f"steps 151-200, ratio {late / early:.2f}x (target <= 1.3x)"
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
    llm_loop_flatness()
    lunch_with_bob()
    import_time(3 if quick else 9)


if __name__ == "__main__":
    main()
