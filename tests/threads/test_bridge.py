"""Recording RoboZ agent runs into threads, and the UI events they produce."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

import roboz.tools
from roboz import Agent, AgentMode, tool
from roboz.agent.errors import AgentRunError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Stop, Str
from roboz.threads import (
    AgentClientContextEntry,
    AgentErrorContent,
    AgentErrorEvent,
    AgentEvent,
    AgentMessageStatus,
    AgentRole,
    AgentStartTextEvent,
    AgentTextContent,
    AgentTextDeltaEvent,
    AgentTextEndEvent,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolResultEvent,
    AgentToolUseContent,
    AgentToolUseEvent,
    ClientViewingContext,
    SQLiteThreadStore,
    ThreadRecorder,
)


def recorded_run(
    store: SQLiteThreadStore,
    replies: list[object],
    tools: Sequence[object] = (),
    **agent_kw: object,
) -> tuple[str, ThreadRecorder]:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id)
    sink.add_user_message("please stop", context=ClientViewingContext(file_ids=["f1"]))
    agent = Agent(
        name="recorded",
        agent_endpoint=MockLLMEndpoint(replies),
        tools=[*tools, roboz.tools.stop],  # type: ignore[list-item]
        event_sinks=[sink],
        **agent_kw,  # type: ignore[arg-type]
    )
    agent.invoke()
    return thread_id, sink


def test_a_run_on_the_mock_endpoint_is_recorded(store: SQLiteThreadStore) -> None:
    thread_id, sink = recorded_run(store, [{"action": "stop", "value": "x"}])
    thread = store.get_thread(thread_id)
    assert thread.status is AgentThreadStatus.USER_TURN
    assert [m.role for m in thread.messages] == [
        AgentRole.USER,
        AgentRole.ASSISTANT,
        AgentRole.ROBOTO,
    ]
    assert all(m.is_complete() for m in thread.messages)
    user, reply, results = thread.messages
    assert isinstance(user.content[1], AgentClientContextEntry)

    text, use = reply.content
    # The reply's prose (here the stop value), not its JSON; the JSON is the raw request.
    assert isinstance(text, AgentTextContent) and text.text == "x"
    assert isinstance(use, AgentToolUseContent)
    assert use.tool_name == "stop" and use.input == {"value": "x"}
    assert use.raw_request == {"action": "stop", "value": "x"}

    (result,) = results.content
    assert isinstance(result, AgentToolResultContent)
    assert result.tool_use_id == use.tool_use_id and result.tool_name == "stop"
    assert result.status == "success" and result.payload == {"value": "x"}
    assert isinstance(result.runtime_ms, int) and result.runtime_ms >= 0

    kinds = [type(e) for e in sink.events]
    assert kinds == [
        AgentStartTextEvent,
        AgentTextDeltaEvent,
        AgentTextEndEvent,
        AgentToolUseEvent,
        AgentToolResultEvent,
    ]
    use_event, result_event = sink.events[3], sink.events[4]
    assert isinstance(use_event, AgentToolUseEvent) and use_event.tool_use_id == use.tool_use_id
    assert isinstance(result_event, AgentToolResultEvent)
    assert result_event.success and result_event.output == {"value": "x"}
    assert result_event.runtime_ms == result.runtime_ms


def test_invoked_tool_results_pair_with_the_llm_tool_use(store: SQLiteThreadStore) -> None:
    @tool
    def shout(input: Str, messages: list[Message]) -> Str:
        """Shout the text."""
        return Str(value=input.value.upper())

    replies: list[object] = [
        {"action": "shout", "value": "hi", "rationale": "be loud"},
        {"action": "stop", "value": "done"},
    ]
    thread_id, _ = recorded_run(store, replies, tools=[shout])
    messages = store.get_thread(thread_id).messages
    roles = [m.role for m in messages]
    assert roles == [AgentRole.USER, *[AgentRole.ASSISTANT, AgentRole.ROBOTO] * 2]
    uses = [b for m in messages for b in m.content if isinstance(b, AgentToolUseContent)]
    results = [b for m in messages for b in m.content if isinstance(b, AgentToolResultContent)]
    assert [u.tool_name for u in uses] == ["shout", "stop"]
    assert [r.tool_use_id for r in results] == [u.tool_use_id for u in uses]
    assert results[0].payload == {"value": "HI"}


def test_rejected_reply_is_replaced_in_place_and_clients_reset(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    snapshots: list[str] = []
    sink = ThreadRecorder(store, thread_id)
    sink.add_user_message("go")
    client = store.get_thread(thread_id)

    def watch(event: AgentEvent) -> None:
        # A UI pulling a delta after every event must stay equal to the server.
        nonlocal client
        client = client.apply_delta(store.delta_since(thread_id, client.continuation_token))
        snapshots.append(type(event).__name__)

    sink.on_event = watch
    Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint(["not json", {"action": "stop", "value": "ok"}]),
        tools=[roboz.tools.stop],
        event_sinks=[sink],
    ).invoke()
    server = store.get_thread(thread_id)
    client = client.apply_delta(store.delta_since(thread_id, client.continuation_token))
    assert client == server
    assert len(server.messages) == 3  # one reply, not the rejected draft plus the reply
    assert "not json" not in server.messages[1].model_dump_json()
    # Every started text is ended; "not json" has no prose, so only the reply started one.
    starts = snapshots.count("AgentStartTextEvent")
    assert starts == 1 and snapshots.count("AgentTextEndEvent") == starts


def test_streaming_deltas_grow_a_generating_message(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    seen: list[tuple[AgentMessageStatus, str]] = []
    streamed = ""
    client = store.get_thread(thread_id)

    def watch(event: AgentEvent) -> None:
        nonlocal streamed, client
        client = client.apply_delta(store.delta_since(thread_id, client.continuation_token))
        if isinstance(event, AgentTextDeltaEvent):
            streamed += event.text
            last = store.get_thread(thread_id).messages[-1]
            text = "".join(b.text for b in last.content if isinstance(b, AgentTextContent))
            seen.append((last.status, text))

    sink = ThreadRecorder(store, thread_id, on_event=watch)
    reply = {"action": "stop", "value": "a longer final answer"}
    Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint(chunk_size=7, responses=[reply]),
        tools=[roboz.tools.stop],
        event_sinks=[sink],
    ).invoke()
    assert len(seen) > 3
    assert all(status is AgentMessageStatus.GENERATING for status, _ in seen)
    texts = [text for _, text in seen]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == streamed == "a longer final answer"
    assert store.get_thread(thread_id).messages[-2].is_complete()
    # A UI that applied a delta after every event holds exactly the stored thread.
    client = client.apply_delta(store.delta_since(thread_id, client.continuation_token))
    assert client == store.get_thread(thread_id)


def test_a_ui_following_the_thread_sees_the_prose_as_it_is_generated(
    store: SQLiteThreadStore,
) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    held = store.get_thread(thread_id)
    shown: list[str] = []

    def ui(event: AgentEvent) -> None:
        nonlocal held
        held = held.apply_delta(store.delta_since(thread_id, held.continuation_token))
        last = held.messages[-1]
        if last.role is AgentRole.ASSISTANT:
            shown.append("".join(b.text for b in last.content if isinstance(b, AgentTextContent)))

    reply = {
        "action": "stop",
        "rationale": 'The sum is known, so "stop" with it.',
        "value": "2 + 2 = 4\n— done",
    }
    Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint(chunk_size=7, responses=[reply]),
        tools=[roboz.tools.stop],
        event_sinks=[ThreadRecorder(store, thread_id, on_event=ui)],
    ).invoke()
    final = 'The sum is known, so "stop" with it.\n\n2 + 2 = 4\n— done'
    # Grew fragment by fragment, decoded (quotes, newlines, non-ASCII), never a piece of JSON.
    assert len(shown) > 5 and shown[-1] == final
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(shown))
    assert not any("{" in text or '"action"' in text for text in shown)
    reply_row = store.get_thread(thread_id).messages[-2]
    use = reply_row.content[-1]
    assert isinstance(use, AgentToolUseContent) and use.raw_request == reply
    held = held.apply_delta(store.delta_since(thread_id, held.continuation_token))
    assert held == store.get_thread(thread_id)


def test_chained_tools_get_minted_tool_uses(store: SQLiteThreadStore) -> None:
    @tool
    def start(input: Empty, messages: list[Message]) -> Int:
        """Start."""
        return Int(value=1)

    @tool(chained_to=start)
    def finish(input: Int, messages: list[Message]) -> Stop:
        """Finish."""
        return Stop(value=input.value + 1)

    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id)
    Agent(
        name="chain",
        mode=AgentMode.DETERMINISTIC,
        default_tools=[start],
        tools=[finish],
        event_sinks=[sink],
    ).invoke()
    (message,) = store.get_thread(thread_id).messages
    assert message.role is AgentRole.ROBOTO and message.is_complete()
    kinds = [(type(b).__name__, getattr(b, "tool_name", None)) for b in message.content]
    assert kinds == [
        ("AgentToolUseContent", "start"),
        ("AgentToolResultContent", "start"),
        ("AgentToolUseContent", "finish"),
        ("AgentToolResultContent", "finish"),
    ]
    use_ids = [b.tool_use_id for b in message.content]  # type: ignore[union-attr]
    assert use_ids[0] == use_ids[1] != use_ids[2] == use_ids[3]
    assert message.content[3].payload == {"value": 2}  # type: ignore[union-attr]


def test_a_failing_tool_is_recorded_as_an_error(store: SQLiteThreadStore) -> None:
    @tool
    def explode(input: Str, messages: list[Message]) -> Str:
        """Always fails."""
        raise RuntimeError("kaboom")

    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id)
    agent = Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint([{"action": "explode", "value": "v"}]),
        tools=[explode, roboz.tools.stop],
        event_sinks=[sink],
    )
    with pytest.raises(AgentRunError, match="kaboom"):
        agent.invoke()
    thread = store.get_thread(thread_id)
    assert thread.status is AgentThreadStatus.USER_TURN
    results = thread.messages[-1]
    assert results.role is AgentRole.ROBOTO and results.status is AgentMessageStatus.FAILED
    result, error = results.content
    assert isinstance(result, AgentToolResultContent) and result.status == "error"
    assert "kaboom" in str(result.payload)
    assert isinstance(error, AgentErrorContent) and "kaboom" in error.error_message
    assert isinstance(sink.events[-1], AgentErrorEvent)
    result_events = [e for e in sink.events if isinstance(e, AgentToolResultEvent)]
    assert [e.success for e in result_events] == [False]


def test_a_failing_llm_marks_the_reply_failed(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id)
    agent = Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint([RuntimeError("provider down")]),
        tools=[roboz.tools.stop],
        event_sinks=[sink],
    )
    with pytest.raises(Exception, match="provider down"):
        agent.invoke()
    reply = store.get_thread(thread_id).messages[-1]
    assert reply.role is AgentRole.ASSISTANT and reply.is_unsuccessful()
    assert any(isinstance(b, AgentErrorContent) for b in reply.content)


def test_events_of_other_agents_are_ignored(store: SQLiteThreadStore) -> None:
    from roboz.runtime.events import ToolFinished, ToolStarted

    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id, agent="mine")
    sink(ToolStarted(agent="other", tool="t", trigger="default"))
    sink(ToolFinished(agent="other", tool="t", output=Str(value="x"), duration_s=0.1))
    assert store.get_thread(thread_id).messages == [] and sink.events == []
    sink(ToolStarted(agent="mine", tool="t", trigger="default"))
    sink(ToolFinished(agent="mine", tool="t", output=Str(value="x"), duration_s=0.25))
    (message,) = store.get_thread(thread_id).messages
    result = message.content[1]
    assert isinstance(result, AgentToolResultContent) and result.runtime_ms == 250


def test_loading_a_skill_answers_its_tool_use(store: SQLiteThreadStore) -> None:
    from roboz import Skill

    manners = Skill(name="manners", description="Be polite", instructions="Say please.")
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id)
    Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint([{"action": "manners"}, {"action": "stop", "value": "ok"}]),
        tools=[roboz.tools.stop],
        skills=[manners],
        event_sinks=[sink],
    ).invoke()
    messages = store.get_thread(thread_id).messages
    uses = [b for m in messages for b in m.content if isinstance(b, AgentToolUseContent)]
    results = [b for m in messages for b in m.content if isinstance(b, AgentToolResultContent)]
    assert [u.tool_name for u in uses] == ["manners", "stop"]
    assert [r.tool_use_id for r in results] == [u.tool_use_id for u in uses]
    assert results[0].payload == {"skill": "manners", "loaded": True}
    assert all(m.is_complete() for m in messages)


def test_a_cancelled_run_is_recorded_as_cancelled_not_failed(store: SQLiteThreadStore) -> None:
    from roboz.agent import AgentCancelledError
    from roboz.agent.context import current_run

    @tool
    def leave(input: Str, messages: list[Message]) -> Str:
        """Stop the run from inside (as a user's cancel would)."""
        context = current_run()
        assert context is not None
        context.cancel.set()
        return Str(value="bye")

    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    sink = ThreadRecorder(store, thread_id)
    agent = Agent(
        name="a",
        agent_endpoint=MockLLMEndpoint([{"action": "leave", "value": "v"}]),
        tools=[leave, roboz.tools.stop],
        event_sinks=[sink],
    )
    with pytest.raises(AgentCancelledError):
        agent.invoke()
    thread = store.get_thread(thread_id)
    assert thread.status is AgentThreadStatus.USER_TURN
    ended = thread.messages[-1]
    assert ended.status is AgentMessageStatus.CANCELLED and ended.is_unsuccessful()
    error = ended.content[-1]
    assert isinstance(error, AgentErrorContent) and error.error_code == "cancelled"
    assert not any(m.status is AgentMessageStatus.FAILED for m in thread.messages)
    last = sink.events[-1]
    assert isinstance(last, AgentErrorEvent) and last.error_code == "cancelled"
