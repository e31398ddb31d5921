"""Content that once crashed a read or slipped past a write: a store reads back every
thread it accepted, refuses what it cannot store with its documented errors (nothing
recorded), and reports a row it cannot decode as CorruptRecordError, never anything else."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from roboz.threads import (
    AgentErrorContent,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTask,
    AgentTextContent,
    CorruptRecordError,
    SQLiteThreadStore,
    ThreadStore,
    UnencodableTextError,
)

DEEP = "<ctx>" + "[" * 100_000 + "]" * 100_000 + "</ctx>"


def test_a_deeply_nested_context_marker_reads_back_as_the_text_it_is(
    store: ThreadStore,
) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    store.append_message(thread_id, AgentMessage.text(DEEP, role=AgentRole.ROBOTO))
    store.append_message(thread_id, AgentMessage.text("after it"))
    messages = store.get_thread(thread_id).messages
    assert messages[0].content == [AgentTextContent(text=DEEP)]
    assert messages[1].content == [AgentTextContent(text="after it")]
    delta = store.delta_since(thread_id, None)
    assert delta.messages_by_idx[0].content == [AgentTextContent(text=DEEP)]


def test_a_shallow_context_marker_is_still_lifted() -> None:
    lifted = AgentMessage.text('<ctx>{"misc_context": {"a": [[1]]}}</ctx>', role=AgentRole.ROBOTO)
    assert lifted.content[0].content_type == "client_context"  # type: ignore[union-attr]
    # Brackets inside strings do not nest, and escaped quotes do not end a string.
    quoted = '<ctx>{"dataset_ids": ["' + "[" * 200 + '\\"' + "{" * 200 + '"]}</ctx>'
    block = AgentMessage.text(quoted, role=AgentRole.ROBOTO).content[0]
    assert block.content_type == "client_context"  # type: ignore[union-attr]


@pytest.mark.sqlite_only
def test_a_row_nested_too_deep_to_decode_is_a_corrupt_record(
    store: SQLiteThreadStore, db_path: Path
) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    store.append_message(thread_id, AgentMessage.text("fine"))
    deep = "[" * 100_000 + "]" * 100_000
    with sqlite3.connect(db_path) as raw:
        raw.execute("UPDATE messages SET content = ? WHERE seq = 0", (deep,))
    with pytest.raises(CorruptRecordError, match=r"message 0 of thread"):
        store.get_thread(thread_id)
    with pytest.raises(CorruptRecordError, match=r"message 0 of thread"):
        store.delta_since(thread_id, None)
    with sqlite3.connect(db_path) as raw:
        raw.execute("UPDATE messages SET content = '[]' WHERE seq = 0")
        raw.execute("UPDATE threads SET tasks = ?, meta = ?", (deep, deep))
    with pytest.raises(CorruptRecordError, match=r"thread .* cannot be decoded"):
        store.get_thread(thread_id)
    with pytest.raises(CorruptRecordError, match=r"tasks and goals of thread"):
        store.get_tasks_and_goals(thread_id)
    with pytest.raises(CorruptRecordError, match=r"run context of thread"):
        store.get_run_context(thread_id)


def test_text_that_cannot_be_encoded_is_refused_naming_the_field(store: ThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    before = store.get_thread(thread_id)
    cases = [
        (lambda: store.append_message(thread_id, AgentMessage.text("\ud800")), r"content\[0\]"),
        (
            lambda: store.append_message(
                thread_id,
                AgentMessage(
                    role=AgentRole.ASSISTANT,
                    content=[
                        AgentTextContent(text="ok"),
                        AgentErrorContent(error_message="\ud806"),
                    ],
                    status=AgentMessageStatus.FAILED,
                ),
            ),
            r"content\[1\] \(AgentErrorContent\)",
        ),
        (lambda: store.set_title(thread_id, "t\udcff"), "title"),
        (
            lambda: store.set_tasks(thread_id, [AgentTask(task_id=1, position=0, title="\ud800")]),
            "tasks",
        ),
        (lambda: store.create_thread(org_id="\ud800", created_by="u"), "org_id"),
    ]
    for write, field in cases:
        with pytest.raises(UnencodableTextError, match=field) as caught:
            write()
        assert "nothing was written" in str(caught.value)
    after = store.get_thread(thread_id)
    assert after.messages == [] and after.title is None and after.tasks == []
    assert after.continuation_token == before.continuation_token
    assert [t.thread_id for t in store.list_threads()] == [thread_id]
