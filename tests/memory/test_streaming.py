"""A persisted run streams its replies into the thread: a UI applying every delta watches the
reply grow and ends equal to the stored thread; the agent's conversation stays exact."""

from __future__ import annotations

import roboz.tools
from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Str
from roboz.runtime.events import Event
from roboz.threads import (
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadRecord,
    AgentToolUseContent,
    SQLiteThreadStore,
)


@tool
def echo(input: Str, messages: list[Message]) -> Str:
    """Echo the text."""
    return Str(value=input.value)


def watched_run(
    store: SQLiteThreadStore, replies: list[object], thread_id: str
) -> tuple[list[Message], AgentThreadRecord, list[tuple[AgentMessageStatus, str]]]:
    store.create_thread(org_id="local", created_by="ui", thread_id=thread_id)
    client = store.get_thread(thread_id)
    growing: list[tuple[AgentMessageStatus, str]] = []

    def ui(event: Event) -> None:
        nonlocal client
        client = client.apply_delta(store.delta_since(thread_id, client.continuation_token))
        if client.messages and client.messages[-1].role is AgentRole.ASSISTANT:
            last = client.messages[-1]
            text = "".join(b.text for b in last.content if isinstance(b, AgentTextContent))
            growing.append((last.status, text))

    agent = Agent(
        name="streamer",
        agent_endpoint=MockLLMEndpoint(chunk_size=5, responses=replies),
        tools=[echo, roboz.tools.stop],
        initial_messages=["go"],
        event_sinks=[ui],
        store=store,
    )
    _, conversation = agent.invoke(thread_id=thread_id)
    client = client.apply_delta(store.delta_since(thread_id, client.continuation_token))
    return list(conversation), client, growing


def test_a_streamed_reply_grows_in_the_ui_and_ends_equal_to_the_thread(
    store: SQLiteThreadStore,
) -> None:
    reply = {"action": "echo", "value": "hello there"}
    conversation, client, growing = watched_run(
        store, [reply, {"action": "stop", "value": "ok"}], "stream-1"
    )
    assert client == store.get_thread("stream-1")
    generating = [text for status, text in growing if status is AgentMessageStatus.GENERATING]
    assert len(generating) > 3 and generating[-1] and len(set(generating)) > 3
    first_reply = client.messages[1]
    assert first_reply.is_complete()
    fragments = [b for b in first_reply.content if isinstance(b, AgentTextContent)]
    assert len(fragments) > 1  # sent as it streamed, each fragment once
    # The reply's prose as the same LLMProseDelta events decode it, not its raw JSON.
    assert "".join(b.text for b in fragments) == "hello there"
    assert [b.tool_name for b in first_reply.content if isinstance(b, AgentToolUseContent)] == [
        "echo"
    ]
    assert len(client.messages) == len(conversation)  # still one row per message


def test_a_rejected_streamed_reply_is_reset_and_order_is_kept(store: SQLiteThreadStore) -> None:
    conversation, client, _ = watched_run(
        store, ["not json at all", {"action": "stop", "value": "ok"}], "stream-2"
    )
    assert client == store.get_thread("stream-2")
    assert len(client.messages) == len(conversation)
    # Resumed, the conversation is the same, in the same order, message for message.
    seen: list[list[Message]] = []

    @tool
    def look(input: Str, messages: list[Message]) -> Str:
        """Look at the conversation."""
        seen.append(list(messages))
        return Str(value="ok")

    Agent(
        name="streamer",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "look", "value": "x"}, {"action": "stop", "value": "ok"}]
        ),
        tools=[look, roboz.tools.stop],
        store=store,
    ).invoke(thread_id="stream-2")
    resumed = seen[0][: len(conversation)]
    assert [(m.role, m.content) for m in resumed] == [(m.role, m.content) for m in conversation]
