"""Persisted runs: every message committed as appended, resumed field by field, one truth."""

from __future__ import annotations

import sqlite3

import pytest

import roboz.tools
from roboz import Agent, AgentMode, tool
from roboz.agent.errors import AgentConfigurationError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Image, Int, Message, Role, Severity, Stop, Str, StrImage, Truncation
from roboz.threads import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
    SQLiteThreadStore,
)

PNG = Image.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)


@tool
def look(input: Str, messages: list[Message]) -> StrImage:
    """Look at something and return a picture of it."""
    return StrImage(value=f"saw {input.value}", images=[PNG])


@tool
def read_log(input: Str, messages: list[Message]) -> Str:
    """Read a long log."""
    return Str(value="log line " * 50, truncation=Truncation(threshold=1, severity=Severity.STUB))


def agent(store: SQLiteThreadStore, replies: list[object]) -> Agent:
    return Agent(
        name="keeper",
        agent_endpoint=MockLLMEndpoint(replies),
        tools=[look, read_log, roboz.tools.stop],
        initial_messages=["look at the cat"],
        store=store,
    )


FIRST = [
    {"action": "look", "value": "cat"},
    {"action": "read_log", "value": "x"},
    {"action": "stop", "value": "a cat"},
]


def test_resumed_conversation_equals_the_first_run_field_by_field(
    store: SQLiteThreadStore,
) -> None:
    first = agent(store, FIRST)
    stop, conversation = first.invoke(thread_id="cats-1")
    assert isinstance(stop, Stop) and first.thread_id == "cats-1"
    returned = [m.model_copy() for m in conversation]
    assert any(m.images == [PNG] for m in returned)
    assert any(m.token_input for m in returned) and any(m.truncation for m in returned)

    seen: list[list[Message]] = []

    @tool
    def inspect(input: Str, messages: list[Message]) -> Str:
        """Look at the conversation."""
        seen.append(list(messages))
        return Str(value="ok")

    second = Agent(
        name="keeper",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "inspect", "value": "x"}, {"action": "stop", "value": "done"}]
        ),
        tools=[inspect, roboz.tools.stop],
        store=store,
    )
    second.invoke([Message(role=Role.USER, content="and now?")], thread_id="cats-1")
    resumed = seen[0][: len(returned)]
    for before, after in zip(returned, resumed, strict=True):
        for field in Message.model_fields:
            if field != "times_shown":
                assert getattr(after, field) == getattr(before, field), field
    # How often truncated messages were shown survives too, so they stay truncated.
    assert [m.times_shown for m in resumed] == [m.times_shown for m in returned]
    assert seen[0][len(returned)].content == "and now?"


@pytest.mark.sqlite_only
def test_the_thread_view_is_the_same_rows(store: SQLiteThreadStore) -> None:
    run = agent(store, FIRST)
    _, conversation = run.invoke(thread_id="cats-2")
    thread = store.get_thread("cats-2")
    assert len(thread.messages) == len(conversation)  # one row per message, no second copy
    assert thread.status is AgentThreadStatus.USER_TURN
    assert [m.role for m in thread.messages][:3] == [
        AgentRole.USER,
        AgentRole.ASSISTANT,
        AgentRole.ROBOTO,
    ]
    uses = [b for m in thread.messages for b in m.content if isinstance(b, AgentToolUseContent)]
    results = [
        b for m in thread.messages for b in m.content if isinstance(b, AgentToolResultContent)
    ]
    assert [u.tool_name for u in uses] == ["look", "read_log", "stop"]
    assert [r.tool_use_id for r in results] == [u.tool_use_id for u in uses]
    # What the tool returned, its image beside its value (the API view carries both).
    assert results[0].payload == {"value": "saw cat", "images": [{"url": PNG.url}]}
    assert all(r.runtime_ms >= 0 for r in results)
    with sqlite3.connect(store.path) as raw:
        (rows,) = raw.execute("SELECT count(*) FROM messages WHERE thread_id = 'cats-2'").fetchone()
    assert rows == len(conversation)
    full = store.delta_since("cats-2", None)
    assert len(full.messages_by_idx) == len(conversation)


def test_each_message_is_committed_when_it_is_appended(store: SQLiteThreadStore) -> None:
    counts: list[int] = []

    @tool
    def count_rows(input: Str, messages: list[Message]) -> Str:
        """Count what is stored so far."""
        counts.append(len(store.get_thread("cats-3").messages))
        counts.append(len(messages))
        return Str(value="counted")

    Agent(
        name="keeper",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "count_rows", "value": "x"}, {"action": "stop", "value": "ok"}]
        ),
        tools=[count_rows, roboz.tools.stop],
        initial_messages=["go"],
        store=store,
    ).invoke(thread_id="cats-3")
    assert counts[0] == counts[1] == 2  # the user's message and the action: both committed


def test_a_new_thread_id_per_invoke_and_show_agent_info_names_it(
    store: SQLiteThreadStore,
) -> None:
    run = agent(store, [{"action": "stop", "value": "a"}, {"action": "stop", "value": "b"}])
    assert type(store).__name__ in run.show_agent_info(print_it=False)
    run.invoke()
    first = run.thread_id
    run.invoke()
    assert first and run.thread_id and first != run.thread_id
    info = run.show_agent_info(print_it=False)
    assert str(getattr(store, "path", "")) in info and run.thread_id in info
    texts = [
        b.text
        for b in store.get_thread(first).messages[0].content
        if isinstance(b, AgentTextContent)
    ]
    assert texts == ["look at the cat"]


def test_thread_id_without_a_store_is_refused() -> None:
    plain = Agent(name="p", agent_endpoint=MockLLMEndpoint([]), tools=[roboz.tools.stop])
    with pytest.raises(AgentConfigurationError, match="needs a store"):
        plain.invoke(thread_id="t1")


def test_the_persisted_list_refuses_rewrites(store: SQLiteThreadStore) -> None:
    _, conversation = agent(store, [{"action": "stop", "value": "a"}]).invoke()
    with pytest.raises(TypeError, match="only grows"):
        conversation[0] = Message(role=Role.USER, content="x")
    with pytest.raises(TypeError, match="only grows"):
        del conversation[0]


def test_passing_the_returned_conversation_back_appends_only_what_is_new(
    store: SQLiteThreadStore,
) -> None:
    run = agent(store, [{"action": "stop", "value": "a"}, {"action": "stop", "value": "b"}])
    _, conversation = run.invoke(thread_id="back-1")
    stored = len(store.get_thread("back-1").messages)
    conversation.append(Message(role=Role.USER, content="one more thing"))  # after the run
    assert len(store.get_thread("back-1").messages) == stored  # not written by itself
    _, again = run.invoke(conversation, thread_id="back-1")
    texts = [m.content for m in again]
    assert texts.count("look at the cat") == 1 and texts.count("one more thing") == 1
    assert len(store.get_thread("back-1").messages) == len(again) == stored + 3


@pytest.mark.sqlite_only
def test_appending_never_rewrites_earlier_rows(store: SQLiteThreadStore) -> None:
    @tool
    def begin(input: Empty, messages: list[Message]) -> Int:
        """Start."""
        return Int(value=0)

    @tool(chained_to=["begin", "step"], chain_condition=lambda x: x.value < 50)
    def step(input: Int, messages: list[Message]) -> Int:
        """Count."""
        return Int(value=input.value + 1)

    @tool(chained_to=step, chain_condition=lambda x: x.value >= 50)
    def end(input: Int, messages: list[Message]) -> Stop:
        """End."""
        return Stop(value=input.value)

    chain = Agent(
        name="chain",
        mode=AgentMode.DETERMINISTIC,
        default_tools=[begin],
        tools=[step, end],
        store=store,
    )
    _, conversation = chain.invoke(thread_id="chain-1")
    with sqlite3.connect(store.path) as raw:
        rows = raw.execute(
            "SELECT seq, revision, base_revision FROM messages WHERE thread_id = 'chain-1'"
        ).fetchall()
    assert len(rows) == len(conversation) == 52
    assert all(revision == base for _, revision, base in rows)  # written once, never again


def test_a_message_a_client_added_through_the_thread_api_is_read_back(
    store: SQLiteThreadStore,
) -> None:
    from roboz.threads import AgentMessage

    run = agent(store, [{"action": "stop", "value": "a"}, {"action": "stop", "value": "b"}])
    _, first = run.invoke(thread_id="ui-1")
    store.append_message("ui-1", AgentMessage.text("a question from the web UI"))
    _, second = run.invoke(thread_id="ui-1")
    added = second[len(first)]
    assert (added.role, added.content) == (Role.USER, "a question from the web UI")
    assert [m.model_dump() for m in second[: len(first)]] == [m.model_dump() for m in first]


def test_a_writer_between_the_runs_appends_is_ordered_in_and_seen_by_deltas(
    store: SQLiteThreadStore,
) -> None:
    """A run's append moves the thread row by the count and revision its last append left;
    another writer in between (a client's message, a title) moves them first, and the run's
    next message still goes after it, with a revision every delta client sees."""
    held: list[str] = []

    @tool
    def begin(input: Empty, messages: list[Message]) -> Int:
        """Start."""
        return Int(value=1)

    @tool(chained_to=begin)
    def poke(input: Int, messages: list[Message]) -> Int:
        """Someone else writes to the thread while the run holds it."""
        held.append(store.delta_since("busy", None).continuation_token)
        note = AgentMessage(
            role=AgentRole.USER,
            content=[AgentTextContent(text="from a client")],
            status=AgentMessageStatus.COMPLETED,
        )
        store.append_message("busy", note)
        store.set_title("busy", "retitled")
        return Int(value=2)

    @tool(chained_to=poke)
    def end(input: Int, messages: list[Message]) -> Stop:
        """Stop."""
        return Stop(value=input.value)

    Agent(
        name="keeper",
        mode=AgentMode.DETERMINISTIC,
        default_tools=[begin],
        tools=[poke, end],
        initial_messages=["go"],
        store=store,
    ).invoke(thread_id="busy")
    thread = store.get_thread("busy")
    texts = [
        "".join(b.text for b in m.content if isinstance(b, AgentTextContent))
        for m in thread.messages
    ]
    # go, begin's result, the client's message, then poke's and end's results.
    assert texts.index("from a client") == 2 and len(thread.messages) == 5
    assert thread.title == "retitled"
    results = [
        b.tool_name
        for m in thread.messages
        for b in m.content
        if isinstance(b, AgentToolResultContent)
    ]
    assert results == ["begin", "poke", "end"]
    # A client that held the thread just before the other writer is sent everything after.
    delta = store.delta_since("busy", held[0])
    assert sorted(delta.messages_by_idx) == [2, 3, 4] and delta.title == "retitled"
