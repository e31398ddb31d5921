"""Deltas: a client that applies every delta it is sent holds exactly the server's thread."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from roboz.threads import (
    AgentGoalStatus,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTask,
    AgentTextContent,
    AgentThreadDelta,
    AgentThreadGoalRecord,
    AgentThreadRecord,
    AgentThreadStatus,
    ContinuationTokenError,
    SQLiteThreadStore,
    ThreadError,
)
from roboz.threads.tokens import encode_token


def draft(text: str) -> AgentMessage:
    return AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[AgentTextContent(text=text)],
        status=AgentMessageStatus.GENERATING,
    )


def goal_record(status: AgentGoalStatus = AgentGoalStatus.PENDING) -> AgentThreadGoalRecord:
    return AgentThreadGoalRecord(
        goal_type="answer",
        goal_data={"goal_type": "answer"},
        status=status,
        message_sequence_num=0,
        created=datetime(2026, 1, 1, tzinfo=UTC),
    )


def sync(store: SQLiteThreadStore, client: AgentThreadRecord) -> AgentThreadRecord:
    return client.apply_delta(store.delta_since(client.thread_id, client.continuation_token))


def test_delta_after_one_new_message_carries_only_that_message(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    for i in range(5):
        store.append_message(thread.thread_id, AgentMessage.text(f"m{i}"))
    client = sync(store, thread)
    store.append_message(thread.thread_id, AgentMessage.text("new"))
    delta = store.delta_since(thread.thread_id, client.continuation_token)
    assert list(delta.messages_by_idx) == [5]
    assert delta.reset_from_message_sequence_num is None
    assert delta.status is None and delta.title is None
    assert delta.tasks is None and delta.goals is None
    empty = store.delta_since(thread.thread_id, delta.continuation_token)
    assert empty.messages_by_idx == {} and empty.continuation_token == delta.continuation_token


def text_of(message: AgentMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, AgentTextContent))


def test_streaming_sends_only_the_unseen_fragment(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    store.append_message(thread.thread_id, AgentMessage.text("q"))
    seq = store.append_message(thread.thread_id, draft("Hel"))
    client = sync(store, thread)
    store.update_message(thread.thread_id, seq, draft("Hello"))
    delta = store.delta_since(thread.thread_id, client.continuation_token)
    assert list(delta.messages_by_idx) == [seq]
    assert delta.messages_by_idx[seq].content == [AgentTextContent(text="lo")]
    client = client.apply_delta(delta)
    assert text_of(client.messages[seq]) == "Hello"
    assert client == store.get_thread(thread.thread_id)


def test_a_ui_applying_every_delta_of_a_streamed_turn_reads_hello(
    store: SQLiteThreadStore,
) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    store.append_message(thread.thread_id, AgentMessage.text("greet me"))
    client = sync(store, thread)
    empty = AgentMessage(role=AgentRole.ASSISTANT, content=[], status=AgentMessageStatus.GENERATING)
    seq = store.append_message(thread.thread_id, empty)
    sent: list[list[str]] = []
    for fragment in ("Hel", "lo", "!"):
        store.append_blocks(thread.thread_id, seq, [AgentTextContent(text=fragment)])
        delta = store.delta_since(thread.thread_id, client.continuation_token)
        sent.append([b.text for b in delta.messages_by_idx[seq].content])  # type: ignore[union-attr]
        client = client.apply_delta(delta)
    store.append_blocks(thread.thread_id, seq, [], AgentMessageStatus.COMPLETED)
    client = sync(store, client)
    assert sent == [["Hel"], ["lo"], ["!"]]  # each fragment travels once
    assert text_of(client.messages[seq]) == "Hello!" and client.messages[seq].is_complete()
    assert client == store.get_thread(thread.thread_id)


def test_appending_blocks_to_a_finished_message_is_refused(store: SQLiteThreadStore) -> None:
    from roboz.threads import MessageFinalizedError

    thread = store.create_thread(org_id="o", created_by="u")
    seq = store.append_message(thread.thread_id, AgentMessage.text("done"))
    with pytest.raises(MessageFinalizedError):
        store.append_blocks(thread.thread_id, seq, [AgentTextContent(text="more")])


def test_content_that_does_not_extend_rewinds_clients(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    seq = store.append_message(thread.thread_id, draft("first try"))
    store.append_message(thread.thread_id, AgentMessage.text("later"))
    client = sync(store, thread)
    store.update_message(thread.thread_id, seq, draft("other"))
    delta = store.delta_since(thread.thread_id, client.continuation_token)
    assert delta.reset_from_message_sequence_num == seq
    assert sorted(delta.messages_by_idx) == [seq, seq + 1]  # both resent whole
    client = client.apply_delta(delta)
    assert client == store.get_thread(thread.thread_id)
    assert text_of(client.messages[seq]) == "other"


def test_regenerated_turn_resets_the_client(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    store.append_message(thread.thread_id, AgentMessage.text("question"))
    seq = store.append_message(thread.thread_id, draft("a draft that will be aband"))
    client = sync(store, thread)
    assert client.messages[seq].content[0].text.startswith("a draft")  # type: ignore[union-attr]

    store.regenerate_turn(thread.thread_id, seq, draft("The"))
    store.update_message(thread.thread_id, seq, draft("The answer"))
    delta = store.delta_since(thread.thread_id, client.continuation_token)
    assert delta.reset_from_message_sequence_num == seq
    client = client.apply_delta(delta)
    assert client.messages == store.get_thread(thread.thread_id).messages
    assert text_of(client.messages[seq]) == "The answer"  # not spliced onto the draft
    # Later deltas are plain appends again.
    store.append_message(thread.thread_id, AgentMessage.text("thanks"))
    later = store.delta_since(thread.thread_id, client.continuation_token)
    assert later.reset_from_message_sequence_num is None and list(later.messages_by_idx) == [2]


def test_regenerate_without_replacement_shrinks_the_thread(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    for i in range(4):
        store.append_message(thread.thread_id, AgentMessage.text(f"m{i}"))
    client = sync(store, thread)
    store.regenerate_turn(thread.thread_id, 1)
    client = sync(store, client)
    assert [m.content[0].text for m in client.messages] == ["m0"]  # type: ignore[union-attr]
    assert store.append_message(thread.thread_id, AgentMessage.text("again")) == 1


def test_tasks_and_goals_snapshot_semantics(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    assert thread.tasks == [] and thread.goals == []  # loaded, none declared
    start = thread.continuation_token
    assert store.delta_since(thread.thread_id, start).tasks is None  # no change: keep yours

    tasks = [
        AgentTask(task_id=2, position=1, title="B"),
        AgentTask(task_id=1, position=0, title="A"),
    ]
    store.set_tasks(thread.thread_id, tasks)
    delta = store.delta_since(thread.thread_id, start)
    assert [t.task_id for t in delta.tasks or []] == [1, 2]  # ordered by position
    assert delta.goals is None

    store.set_tasks(thread.thread_id, [])
    cleared = store.delta_since(thread.thread_id, delta.continuation_token)
    assert cleared.tasks == []  # authoritative: there are none now

    goal = goal_record()
    store.set_goals(thread.thread_id, [goal])
    g_delta = store.delta_since(thread.thread_id, cleared.continuation_token)
    assert g_delta.goals == [goal] and g_delta.tasks is None


def test_full_delta_without_a_token_is_the_whole_thread(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u", title="T")
    store.append_message(thread.thread_id, AgentMessage.text("a"))
    store.regenerate_turn(thread.thread_id, 0, AgentMessage.text("b"))
    delta = store.delta_since(thread.thread_id, None)
    assert delta.reset_from_message_sequence_num is None
    assert delta.title == "T" and delta.tasks == [] and delta.goals == []
    empty = AgentThreadRecord.model_validate(
        {**thread.model_dump(), "messages": [], "tasks": None, "goals": None, "title": None}
    )
    assert empty.apply_delta(delta) == store.get_thread(thread.thread_id)


@pytest.mark.parametrize(
    "token",
    ["", "garbage", "ct1.", "ct1.!!!!", encode_token("th_other", 1), "ct1.LTE6dGg"],
)
def test_bad_tokens_are_refused_and_change_nothing(store: SQLiteThreadStore, token: str) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    store.append_message(thread.thread_id, AgentMessage.text("keep me"))
    before = store.get_thread(thread.thread_id)
    with pytest.raises(ContinuationTokenError):
        store.delta_since(thread.thread_id, token)
    assert store.get_thread(thread.thread_id) == before


def test_token_from_the_future_is_refused(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    with pytest.raises(ContinuationTokenError, match="not issued by this store"):
        store.delta_since(thread.thread_id, encode_token(thread.thread_id, 999))


def test_token_of_another_thread_is_refused(store: SQLiteThreadStore) -> None:
    a = store.create_thread(org_id="o", created_by="u")
    b = store.create_thread(org_id="o", created_by="u")
    with pytest.raises(ContinuationTokenError, match="belongs to thread"):
        store.delta_since(b.thread_id, a.continuation_token)


def test_random_histories_reconstruct_exactly(store: SQLiteThreadStore) -> None:
    """Two clients polling at different rates both end equal to the server after every poll."""
    rng = random.Random(20261130)
    for _round in range(5):
        thread = store.create_thread(org_id="o", created_by="u")
        tid = thread.thread_id
        clients = [thread, thread]
        open_seq: int | None = None
        for step in range(120):
            count = len(store.get_thread(tid, with_tasks_and_goals=False).messages)
            op = rng.choice(["append", "append", "stream", "finish", "regen", "meta"])
            if op == "append" and open_seq is None:
                store.append_message(tid, AgentMessage.text(f"user {step}"))
            elif op == "append" or (op == "stream" and open_seq is None):
                open_seq = store.append_message(tid, draft(f"d{step}"))
            elif op == "stream" and open_seq is not None:
                store.update_message(tid, open_seq, draft(f"d{step} more"))
            elif op == "finish" and open_seq is not None:
                done = AgentMessage.text(f"final {step}", role=AgentRole.ASSISTANT)
                store.update_message(tid, open_seq, done)
                open_seq = None
            elif op == "regen" and count:
                at = rng.randrange(count)
                replacement = draft(f"regen {step}") if rng.random() < 0.7 else None
                store.regenerate_turn(tid, at, replacement)
                open_seq = at if replacement is not None else None
            elif op == "meta":
                choice = rng.randrange(4)
                if choice == 0:
                    store.set_title(tid, f"title {step}")
                elif choice == 1:
                    store.set_status(tid, rng.choice(list(AgentThreadStatus)))
                elif choice == 2:
                    n = rng.randrange(3)
                    store.set_tasks(
                        tid, [AgentTask(task_id=i, position=i, title="x") for i in range(n)]
                    )
                else:
                    store.set_goals(
                        tid,
                        [goal_record(status=AgentGoalStatus.ACHIEVED)]
                        if rng.random() < 0.5
                        else [],
                    )
            for i, every in enumerate((1, 7)):
                if step % every == 0:
                    clients[i] = sync(store, clients[i])
                    assert clients[i] == store.get_thread(tid)
        for i in range(2):
            assert sync(store, clients[i]) == store.get_thread(tid)


@pytest.mark.sqlite_only
def test_changed_messages_are_found_without_walking_the_thread(store: SQLiteThreadStore) -> None:
    """A delta reads only what changed: new rows from the thread's end by key, rows changed
    in place through their index; the query must not walk the whole thread."""
    import sqlite3

    from roboz.threads._rows import TAIL_AND_CHANGED_SQL

    with sqlite3.connect(store.path) as raw:
        plan = raw.execute(f"EXPLAIN QUERY PLAN {TAIL_AND_CHANGED_SQL}", ("t", 0)).fetchall()
    steps = [str(row[-1]) for row in plan if str(row[-1]).startswith(("SEARCH", "SCAN"))]
    assert steps == [
        "SEARCH messages USING PRIMARY KEY (thread_id=? AND seq>?)",
        "SEARCH messages USING PRIMARY KEY (thread_id=?)",
        "SEARCH messages USING INDEX messages_changed (thread_id=? AND revision>?)",
    ]
    assert not any("TEMP B-TREE" in str(row[-1]) for row in plan)  # walked back, not sorted


def test_impossible_deltas_are_refused_naming_the_field(store: SQLiteThreadStore) -> None:
    empty = store.create_thread(org_id="o", created_by="u")
    held = store.create_thread(org_id="o", created_by="u")
    store.append_message(held.thread_id, AgentMessage.text("my question"))
    one = store.get_thread(held.thread_id)
    failed = {
        "role": "assistant",
        "content": [{"text": "spliced"}],
        "status": "failed",
    }
    for client in (empty, one):
        delta = AgentThreadDelta.model_validate(
            {"continuation_token": client.continuation_token, "messages_by_idx": {"-1": failed}}
        )
        with pytest.raises(ThreadError, match="messages_by_idx has negative index -1"):
            client.apply_delta(delta)
    rewind = AgentThreadDelta(
        continuation_token=one.continuation_token,
        messages_by_idx={},
        reset_from_message_sequence_num=-1,
    )
    with pytest.raises(ThreadError, match="reset_from_message_sequence_num is -1"):
        one.apply_delta(rewind)
    gap = AgentThreadDelta(
        continuation_token=one.continuation_token,
        messages_by_idx={3: AgentMessage.text("later")},
        reset_from_message_sequence_num=3,
    )
    with pytest.raises(ThreadError, match="carries message 3 but the client holds only 1"):
        one.apply_delta(gap)
    # The user's message is untouched by every refused delta.
    assert one.messages[0].content == [AgentTextContent(text="my question")]
    assert one.messages[0].status is AgentMessageStatus.COMPLETED
