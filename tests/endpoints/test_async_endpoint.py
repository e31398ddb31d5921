"""acomplete and ainvoke/astream on the SDK's async client, against the local server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from pathlib import Path

import pytest

from roboz import Agent, AgentMode, tool
from roboz.agent import AgentCancelledError
from roboz.endpoints import EndpointStatusError, EndpointTimeoutError
from roboz.models import Empty, Int, Message
from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    Event,
    LLMDelta,
    LLMProseDelta,
    ToolFinished,
    ToolStarted,
)
from roboz.tools import stop
from tests.endpoints.openai_fake import FakeOpenAIServer, Reply
from tests.endpoints.test_openai_compatible import endpoint_for


def records(text: str = "Hi") -> list:  # type: ignore[type-arg]
    return [{"role": "user", "content": text}]


def test_acomplete_plain_and_streamed(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(
        Reply(text="plain", input_tokens=5, output_tokens=2),
        Reply(chunks=["Hel", "lo"], input_tokens=3, output_tokens=4),
    )
    deltas: list[str] = []

    async def main() -> tuple[str, str]:
        plain = await endpoint_for(openai_server, stream=False).acomplete(records())
        streamed = await endpoint_for(openai_server).acomplete(records(), on_delta=deltas.append)
        assert plain.usage.input_tokens == 5 and streamed.usage.output_tokens == 4
        return plain.text, streamed.text

    assert asyncio.run(main()) == ("plain", "Hello")
    assert deltas == ["Hel", "lo"]
    first, second = (request.json() for request in openai_server.requests)
    assert "stream" not in first and second["stream"] is True


def test_acomplete_retries_then_fails_clearly_and_times_out(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.enqueue(
        Reply(status=429, error_message="slow down"),
        Reply(text="made it"),
        *[Reply(status=500, error_message="upstream exploded")] * 2,
        Reply(delay_s=30),
    )

    async def main() -> None:
        made = await endpoint_for(openai_server).acomplete(records())
        assert made.text == "made it"
        with pytest.raises(EndpointStatusError, match="HTTP 500 after 2 attempts"):
            await endpoint_for(openai_server, max_retries=1).acomplete(records())
        with pytest.raises(EndpointTimeoutError, match="no reply within 0.3s"):
            await endpoint_for(openai_server, timeout_s=0.3, stream=False).acomplete(records())

    asyncio.run(main())
    assert len(openai_server.requests) == 5


class Numbers(Empty):
    left: int
    right: int


@tool
async def add(input: Numbers, messages: list[Message]) -> Int:
    """Add two numbers."""
    await asyncio.sleep(0)
    return Int(value=input.left + input.right)


def _agent(server: FakeOpenAIServer, **options: object) -> Agent:
    return Agent(
        name="calc",
        agent_endpoint=endpoint_for(server, **options),
        tools=[add, stop],
        mode=AgentMode.AUTONOMOUS,
    )


def test_astream_yields_tool_events_and_prose_as_it_is_generated(
    openai_server: FakeOpenAIServer,
) -> None:
    first = json.dumps({"action": "add", "rationale": "sum them", "left": 2, "right": 40})
    second = json.dumps({"action": "stop", "rationale": "done", "value": "the sum is 42"})
    openai_server.enqueue(
        Reply(chunks=[first[:17], first[17:]]),
        Reply(chunks=[second[i : i + 5] for i in range(0, len(second), 5)]),
    )
    agent = _agent(openai_server)

    async def main() -> list[Event]:
        return [event async for event in agent.astream()]

    events = asyncio.run(main())
    prose: dict[tuple[str, str], str] = {}
    for event in events:
        if isinstance(event, LLMProseDelta):
            key = (event.action, event.field)
            prose[key] = prose.get(key, "") + event.text
    assert prose == {
        ("add", "rationale"): "sum them",
        ("stop", "rationale"): "done",
        ("stop", "value"): "the sum is 42",
    }
    assert len([e for e in events if isinstance(e, LLMDelta)]) > 5
    assert [e.tool for e in events if isinstance(e, ToolStarted)] == [
        "prompt_llm",
        "add",
        "prompt_llm",
        "stop",
    ]
    assert isinstance(events[-1], AgentFinished) and events[-1].output.value == "the sum is 42"
    # Events arrive in the order they happen: the add result before the second request.
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolFinished") < kinds.index("LLMProseDelta", kinds.index("ToolFinished"))
    assert any(isinstance(e, ToolFinished) and e.tool == "add" for e in events)


def test_cancelling_the_reader_mid_stream_cancels_the_request_and_leaves_nothing(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.enqueue(
        Reply(chunks=['{"action": "stop", "rationale": "wait', "never"], chunk_delay_s=30)
    )
    agent = _agent(openai_server)
    threads_before = set(threading.enumerate())
    seen: list[Event] = []
    agent.event_pipe.subscribe(seen.append)

    async def main() -> set[asyncio.Task[object]]:
        async def read() -> None:
            async with contextlib.aclosing(agent.astream()) as events:
                async for event in events:
                    if isinstance(event, LLMProseDelta):
                        reading.set()

        reading = asyncio.Event()
        reader = asyncio.create_task(read())
        await asyncio.wait_for(reading.wait(), 10)
        started = time.monotonic()
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        assert time.monotonic() - started < 2
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    assert asyncio.run(main()) == set()
    # The client closed the connection: the server's end waits in CLOSE_WAIT.
    port = int(openai_server.base_url.rsplit(":", 1)[1].split("/")[0])
    assert _server_side_states(port) == {"CLOSE_WAIT"}
    # No thread of ours is left (the fake server's handler threads are its own).
    assert {t for t in threading.enumerate() if "process_request" not in t.name} <= threads_before
    failed = [e for e in seen if isinstance(e, AgentFailed)]
    assert failed and "cancelled" in failed[0].error
    assert [m.message_kind for m in agent.messages] == []


def _server_side_states(port: int) -> set[str]:
    names = {"01": "ESTABLISHED", "08": "CLOSE_WAIT", "0A": "LISTEN"}
    states = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] != "0A":
            states.add(names.get(fields[3], fields[3]))
    return states


def test_agent_cancel_from_another_thread_ends_ainvoke_while_the_llm_is_slow(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.enqueue(Reply(delay_s=30))
    agent = _agent(openai_server, stream=False)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, lambda: threading.Thread(target=agent.cancel).start())
        started = time.monotonic()
        with pytest.raises(AgentCancelledError):
            await agent.ainvoke()
        assert time.monotonic() - started < 2

    asyncio.run(main())
