"""Async tools and runs: mixing sync and async tools, threads, cancellation, streaming."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import threading

import pytest
from rich.console import Console

from roboz import Agent, AgentMode, factory, tool
from roboz.agent import AgentCancelledError, RunContext, current_run
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Stop
from roboz.runtime.events import AgentFailed, AgentFinished, Event, LLMProseDelta, ToolFinished
from roboz.runtime.sinks import CliSink
from roboz.tools import stop

where: dict[str, str] = {}


@tool
async def start(input: Empty, messages: list[Message]) -> Int:
    """Start (async)."""
    await asyncio.sleep(0)
    where["start"] = threading.current_thread().name
    return Int(value=1)


@tool(chained_to=start)
def double(input: Int, messages: list[Message]) -> Int:
    """Double (sync)."""
    where["double"] = threading.current_thread().name
    return Int(value=input.value * 2)


@factory(chained_to=double)
async def add_context(input: Int, messages: list[Message], ctx: int) -> Stop:
    """Add the context (an async factory)."""
    await asyncio.sleep(0)
    return Stop(value=input.value + ctx)


def _chain_agent() -> Agent:
    return Agent(
        name="mixed",
        agent_endpoint=MockLLMEndpoint([{"action": "start"}]),
        tools=[start, double, add_context(40)],
    )


def test_async_and_sync_tools_chain_into_each_other(driver: str) -> None:
    where.clear()
    threads_before = set(threading.enumerate())
    result, messages = _chain_agent().invoke()
    assert result.value == 42
    assert [m.caller for m in messages] == ["prompt_llm", "start", "double", "add_context"]
    if driver == "invoke":
        # The async tool ran on the run's private loop; the sync one on the caller's thread.
        assert where == {"start": "roboz-agent-loop", "double": "MainThread"}
    else:
        # The async tool ran on the caller's loop; the sync one on a worker thread.
        assert where["start"] == "MainThread" and where["double"] != "MainThread"
    assert set(threading.enumerate()) <= threads_before


def test_a_sync_run_can_cancel_an_async_tool_in_flight() -> None:
    entered = threading.Event()

    @tool
    async def forever(input: Empty, messages: list[Message]) -> Stop:
        """Never ends by itself."""
        entered.set()
        await asyncio.sleep(3600)
        return Stop()

    agent = Agent(
        name="c", agent_endpoint=MockLLMEndpoint([{"action": "forever"}]), tools=[forever]
    )
    threading.Thread(target=lambda: entered.wait(5) and agent.cancel()).start()
    with pytest.raises(AgentCancelledError):
        agent.invoke()
    assert not [t for t in threading.enumerate() if t.name == "roboz-agent-loop"]


def test_cancelling_ainvoke_in_an_async_tool_ends_the_run_like_cancel() -> None:
    events: list[Event] = []

    @tool
    async def forever(input: Empty, messages: list[Message]) -> Stop:
        """Never ends by itself."""
        await asyncio.sleep(3600)
        return Stop()

    agent = Agent(
        name="c",
        agent_endpoint=MockLLMEndpoint([{"action": "forever"}]),
        tools=[forever],
        event_sinks=[events.append],
    )

    async def main() -> set[asyncio.Task[object]]:
        run = asyncio.create_task(agent.ainvoke())
        await asyncio.sleep(0.05)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    assert asyncio.run(main()) == set()
    failed = [e for e in events if isinstance(e, AgentFailed)]
    assert failed and "cancelled after 2 step(s)" in failed[0].error
    assert [m.caller for m in agent.messages] == ["prompt_llm"]


def test_cancelling_ainvoke_waits_for_a_sync_tool_and_no_thread_is_left() -> None:
    release, running = threading.Event(), threading.Event()
    contexts: list[RunContext | None] = []

    @tool
    def blocking(input: Empty, messages: list[Message]) -> Stop:
        """Blocks until released."""
        contexts.append(current_run())
        running.set()
        release.wait(5)
        return Stop()

    agent = Agent(
        name="c", agent_endpoint=MockLLMEndpoint([{"action": "blocking"}]), tools=[blocking]
    )

    async def main() -> None:
        run = asyncio.create_task(agent.ainvoke())
        await asyncio.to_thread(running.wait, 5)
        run.cancel()
        await asyncio.sleep(0.05)
        assert not run.done()  # the thread cannot be interrupted: the run waits for it
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await run
        (context,) = contexts
        assert context is not None and context.cancelled

    asyncio.run(main())


REPLY = {"action": "stop", "rationale": 'all "done"\n', "value": "Bye 👋"}


def _prose(events: list[Event]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for event in events:
        if isinstance(event, LLMProseDelta):
            assert event.action == "stop"
            fields[event.field] = fields.get(event.field, "") + event.text
    return fields


def test_stream_and_astream_yield_prose_then_the_result() -> None:
    sync_agent = Agent(
        name="s", agent_endpoint=MockLLMEndpoint(chunk_size=3, responses=[REPLY]), tools=[stop]
    )
    sync_events = list(sync_agent.stream())

    async def collect() -> list[Event]:
        agent = Agent(
            name="s", agent_endpoint=MockLLMEndpoint(chunk_size=3, responses=[REPLY]), tools=[stop]
        )
        return [event async for event in agent.astream()]

    for events in (sync_events, asyncio.run(collect())):
        assert _prose(events) == {"rationale": 'all "done"\n', "value": "Bye 👋"}
        assert len([e for e in events if isinstance(e, LLMProseDelta)]) > 4
        assert isinstance(events[-1], AgentFinished) and events[-1].output.value == "Bye 👋"


def test_leaving_a_stream_early_cancels_the_run_and_joins_its_thread() -> None:
    @tool
    def tick(input: Empty, messages: list[Message]) -> Int:
        """Tick."""
        return Int(value=1)

    recorded: list[Event] = []
    agent = Agent(
        name="t",
        agent_endpoint=MockLLMEndpoint([{"action": "tick"}] * 1000),
        tools=[tick],
        max_steps=5000,
        event_sinks=[recorded.append],
    )
    with contextlib.closing(agent.stream()) as events:
        for event in events:
            if isinstance(event, ToolFinished) and event.tool == "tick":
                break
    assert [e for e in recorded if isinstance(e, AgentFailed) and "cancelled" in e.error]
    assert not [t for t in threading.enumerate() if t.name == "roboz-agent-stream"]


def test_a_failed_stream_ends_with_agent_failed_then_raises() -> None:
    agent = Agent(name="f", agent_endpoint=MockLLMEndpoint([]), tools=[stop])
    seen: list[Event] = []
    with pytest.raises(Exception, match="no reply left"):
        for event in agent.stream():
            seen.append(event)
    assert isinstance(seen[-1], AgentFailed)


def test_long_async_runs_of_instant_steps_share_the_loop() -> None:
    order: list[str] = []

    def make(name: str) -> Agent:
        @tool
        async def begin(input: Empty, messages: list[Message]) -> Int:
            """Begin."""
            return Int(value=0)

        @tool(chained_to=["begin", "count"], chain_condition=lambda x: x.value < 3000)
        async def count(input: Int, messages: list[Message]) -> Int:
            """Count without ever awaiting anything that suspends."""
            order.append(name)
            return Int(value=input.value + 1)

        @tool(chained_to=count, chain_condition=lambda x: x.value >= 3000)
        def end(input: Int, messages: list[Message]) -> Stop:
            """End."""
            return Stop(value=input.value)

        return Agent(
            name=name,
            mode=AgentMode.DETERMINISTIC,
            default_tools=[begin],
            tools=[count, end],
            max_steps=10_000,
        )

    async def main() -> None:
        await asyncio.gather(make("a").ainvoke(), make("b").ainvoke())

    asyncio.run(main())
    switches = sum(1 for x, y in itertools.pairwise(order) if x != y)
    assert switches >= 2  # interleaved, not one run after the other


def test_cli_sink_shows_prose_live() -> None:
    buffer = io.StringIO()
    sink = CliSink(Console(file=buffer, width=200, color_system=None))
    Agent(
        name="s",
        agent_endpoint=MockLLMEndpoint(chunk_size=3, responses=[REPLY]),
        tools=[stop],
        event_sinks=[sink],
    ).invoke()
    text = buffer.getvalue()
    assert 's stop rationale: all "done"\n' in text
    assert "s stop value: Bye 👋\n" in text
    assert json.dumps(REPLY)[:10] not in text.split("s stop value")[0]


def test_a_stream_shows_user_prompts() -> None:
    from roboz.models import Str, StrImage
    from roboz.runtime.events import UserPrompted

    class User:
        def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage:
            return Str(value="blue")

        def notify(self, message: str) -> None:
            pass

    def make() -> Agent:
        endpoint = MockLLMEndpoint(
            [{"action": "ask_user", "question": "Colour?"}, {"action": "stop", "value": "ok"}]
        )
        return Agent(name="u", agent_endpoint=endpoint, tools=[stop], user_io=User())

    async def collect() -> list[Event]:
        return [event async for event in make().astream()]

    for events in (list(make().stream()), asyncio.run(collect())):
        assert [e.prompt for e in events if isinstance(e, UserPrompted)] == ["Colour?"]
