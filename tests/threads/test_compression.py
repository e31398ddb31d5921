"""Compression tiers: originals untouched, alternation kept, user turns and context survive."""

from __future__ import annotations

import pytest

from roboz.threads import (
    FILLER_TEXT,
    AgentClientContextEntry,
    AgentCompressionFillerContent,
    AgentDeletedContent,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTask,
    AgentTaskStatus,
    AgentTextContent,
    AgentToolResultContent,
    AgentToolUseContent,
    ClientViewingContext,
    CompressionError,
    CompressionTier,
    SQLiteThreadStore,
    compressed_view,
    deletion_pass,
    model_facing_blocks,
    resolved_task_interiors,
    stale_tool_exchanges,
    trim_message,
    validate_variant,
)

DONE = AgentMessageStatus.COMPLETED
CONTEXT = AgentClientContextEntry(context=ClientViewingContext(dataset_ids=["ds_1"]))


def use(tid: str) -> AgentToolUseContent:
    return AgentToolUseContent(tool_use_id=tid, tool_name="lookup", input={"id": tid})


def result(tid: str, payload: object = "rows") -> AgentToolResultContent:
    return AgentToolResultContent(
        tool_use_id=tid,
        tool_name="lookup",
        runtime_ms=3,
        status="success",
        payload=payload,  # type: ignore[arg-type]
    )


def conversation() -> list[AgentMessage]:
    return [
        AgentMessage(
            role=AgentRole.USER,
            content=[AgentTextContent(text="look at this"), CONTEXT],
            status=DONE,
        ),
        AgentMessage(role=AgentRole.ASSISTANT, content=[use("t1")], status=DONE),
        AgentMessage(role=AgentRole.ROBOTO, content=[result("t1")], status=DONE),
        AgentMessage(
            role=AgentRole.ASSISTANT, content=[AgentTextContent(text="..."), use("t2")], status=DONE
        ),
        AgentMessage(role=AgentRole.ROBOTO, content=[result("t2", {"big": "x" * 50})], status=DONE),
        AgentMessage(role=AgentRole.USER, content=[AgentTextContent(text="!!!")], status=DONE),
        AgentMessage(
            role=AgentRole.ASSISTANT,
            content=[AgentTextContent(text="Found it."), use("t3")],
            status=DONE,
        ),
        AgentMessage(role=AgentRole.ROBOTO, content=[result("t3")], status=DONE),
    ]


def test_deletion_pass_tombstones_and_fills_without_touching_the_original() -> None:
    original = conversation()
    snapshot = [m.model_copy(deep=True) for m in original]
    variants = deletion_pass(original, {"t1", "t2"})
    assert original == snapshot  # verbatim thread unchanged

    assert variants[1].content == [AgentCompressionFillerContent()]  # only a tombstone left
    assert variants[2].content == [AgentCompressionFillerContent()]
    assert variants[3].content == [AgentCompressionFillerContent()]  # filler text + dropped use
    assert variants[4].content == [AgentCompressionFillerContent()]
    assert 0 not in variants and 5 not in variants  # USER turns, even "!!!", are never touched
    assert 6 not in variants and 7 not in variants  # t3 was kept

    view = compressed_view(
        original,
        {i: {CompressionTier.DELETED: v} for i, v in variants.items()},
        CompressionTier.DELETED,
    )
    assert [m.role for m in view] == [m.role for m in original]  # alternation kept
    assert all(m.content for m in view)
    assert view[0].content[1] == CONTEXT  # the client context block survives


def test_partial_tombstones_keep_the_remaining_blocks() -> None:
    message = AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[AgentTextContent(text="Checking."), use("t1"), use("t2")],
        status=DONE,
    )
    (variant,) = deletion_pass([message], {"t1"}).values()
    assert variant.content == [AgentTextContent(text="Checking."), AgentDeletedContent(), use("t2")]
    assert model_facing_blocks(variant) == [AgentTextContent(text="Checking."), use("t2")]
    filler = AgentMessage(
        role=AgentRole.ROBOTO, content=[AgentCompressionFillerContent()], status=DONE
    )
    assert model_facing_blocks(filler) == [AgentTextContent(text=FILLER_TEXT)]


def test_stale_tool_exchanges_spares_recent_and_unanswered_calls() -> None:
    messages = conversation()
    assert stale_tool_exchanges(messages, keep_last=2) == {"t1", "t2"}
    assert stale_tool_exchanges(messages, keep_last=4) == {"t1"}
    assert stale_tool_exchanges(messages[:2], keep_last=0) == set()  # use without a result


def test_trim_message_cuts_long_payloads_but_never_user_text() -> None:
    long_text = "y" * 100
    assistant = AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[AgentTextContent(text=long_text), result("t", {"k": "z" * 100})],
        status=DONE,
    )
    trimmed = trim_message(assistant, max_chars=20)
    assert trimmed is not None
    text_block, result_block = trimmed.content
    assert isinstance(text_block, AgentTextContent) and text_block.text.startswith("y" * 20)
    assert "80 characters trimmed" in text_block.text
    assert isinstance(result_block, AgentToolResultContent)
    assert isinstance(result_block.payload, str) and "trimmed" in result_block.payload
    assert result_block.tool_use_id == "t"  # the pairing survives
    assert assistant.content[0] == AgentTextContent(text=long_text)  # original untouched
    user = AgentMessage(
        role=AgentRole.USER, content=[AgentTextContent(text=long_text)], status=DONE
    )
    assert trim_message(user, max_chars=20) is None
    assert trim_message(AgentMessage.text("short", role=AgentRole.ASSISTANT), max_chars=20) is None


def test_view_picks_the_strongest_tier_up_to_the_requested_one() -> None:
    original = [AgentMessage.text("a", role=AgentRole.ASSISTANT)]
    trimmed = AgentMessage.text("t", role=AgentRole.ASSISTANT)
    deleted = AgentMessage(
        role=AgentRole.ASSISTANT, content=[AgentCompressionFillerContent()], status=DONE
    )
    both = {0: {CompressionTier.TRIMMED: trimmed, CompressionTier.DELETED: deleted}}
    assert compressed_view(original, both, CompressionTier.TRIMMED) == [trimmed]
    assert compressed_view(original, both, CompressionTier.DELETED) == [deleted]
    only_trimmed = {0: {CompressionTier.TRIMMED: trimmed}}
    assert compressed_view(original, only_trimmed, CompressionTier.DELETED) == [trimmed]
    assert compressed_view(original, {}, CompressionTier.DELETED) == original


def test_store_keeps_variants_beside_the_verbatim_thread(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    original = conversation()
    for message in original:
        store.append_message(thread_id, message)
    for index, variant in deletion_pass(original, {"t1", "t2"}).items():
        store.put_compressed(thread_id, index, CompressionTier.DELETED, variant)
    verbatim = store.get_thread(thread_id).messages
    assert [m.content for m in verbatim] == [m.content for m in original]
    deleted = store.get_compressed_thread(thread_id, CompressionTier.DELETED)
    assert [m.role for m in deleted] == [m.role for m in original]
    assert deleted[2].content == [AgentCompressionFillerContent()]
    assert deleted[0].content == original[0].content
    assert store.get_compressed_thread(thread_id, CompressionTier.TRIMMED) == verbatim


def test_store_refuses_variants_that_break_invariants(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    for message in conversation():
        store.append_message(thread_id, message)
    filler = [AgentCompressionFillerContent()]
    cases = [
        (
            0,
            CompressionTier.DELETED,
            AgentMessage(role=AgentRole.USER, content=filler, status=DONE),
            "USER",
        ),
        (
            0,
            CompressionTier.TRIMMED,
            AgentMessage(role=AgentRole.USER, content=[AgentTextContent(text="x")], status=DONE),
            "client context",
        ),
        (
            1,
            CompressionTier.DELETED,
            AgentMessage(role=AgentRole.ROBOTO, content=filler, status=DONE),
            "role",
        ),
        (
            1,
            CompressionTier.DELETED,
            AgentMessage(role=AgentRole.ASSISTANT, content=[], status=DONE),
            "at least one block",
        ),
        (
            1,
            CompressionTier.TRIMMED,
            AgentMessage(role=AgentRole.ASSISTANT, content=[AgentDeletedContent()], status=DONE),
            "DELETED tier",
        ),
        (
            1,
            CompressionTier.DELETED,
            AgentMessage(
                role=AgentRole.ASSISTANT, content=[*filler, AgentTextContent(text="x")], status=DONE
            ),
            "only block",
        ),
    ]
    for index, tier, variant, reason in cases:
        with pytest.raises(CompressionError, match=reason):
            store.put_compressed(thread_id, index, tier, variant)
    for tier in CompressionTier:
        assert store.get_compressed_thread(thread_id, tier) == store.get_thread(thread_id).messages


def test_regenerating_drops_stale_variants(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    for message in conversation():
        store.append_message(thread_id, message)
    variants = deletion_pass(conversation(), {"t1"})
    store.put_compressed(thread_id, 2, CompressionTier.DELETED, variants[2])
    replacement = AgentMessage(role=AgentRole.ROBOTO, content=[result("t1", "fresh")], status=DONE)
    store.regenerate_turn(thread_id, 2, replacement)
    view = store.get_compressed_thread(thread_id, CompressionTier.DELETED)
    assert view[2].content == replacement.content


def task_call(tid: str, tool_name: str, task_id: int) -> AgentMessage:
    call = AgentToolUseContent(tool_use_id=tid, tool_name=tool_name, input={"task_id": task_id})
    return AgentMessage(role=AgentRole.ASSISTANT, content=[call], status=DONE)


def task_result(tid: str, tool_name: str, status: str = "success") -> AgentMessage:
    block = AgentToolResultContent(
        tool_use_id=tid, tool_name=tool_name, runtime_ms=1, status=status, payload="Tasks: ..."
    )
    return AgentMessage(role=AgentRole.ROBOTO, content=[block], status=DONE)


def task_thread() -> list[AgentMessage]:
    """Task 1 started (1-2), worked on (3-7, with a user's message and its context at 5),
    completed (8-9); then work outside any task (10-11)."""
    return [
        AgentMessage(role=AgentRole.USER, content=[AgentTextContent(text="Go.")], status=DONE),
        task_call("s1", "start_task", 1),
        task_result("s1", "start_task"),
        AgentMessage(
            role=AgentRole.ASSISTANT,
            content=[AgentTextContent(text="Loading the data."), use("t1")],
            status=DONE,
        ),
        AgentMessage(role=AgentRole.ROBOTO, content=[result("t1")], status=DONE),
        AgentMessage(
            role=AgentRole.USER, content=[AgentTextContent(text="Use May."), CONTEXT], status=DONE
        ),
        AgentMessage(
            role=AgentRole.ASSISTANT,
            content=[AgentTextContent(text="May it is."), use("t2")],
            status=DONE,
        ),
        AgentMessage(role=AgentRole.ROBOTO, content=[result("t2")], status=DONE),
        task_call("c1", "complete_task", 1),
        task_result("c1", "complete_task"),
        AgentMessage(role=AgentRole.ASSISTANT, content=[use("t3")], status=DONE),
        AgentMessage(role=AgentRole.ROBOTO, content=[result("t3")], status=DONE),
    ]


def tasks(status: AgentTaskStatus) -> list[AgentTask]:
    return [AgentTask(task_id=1, position=0, title="load data", status=status)]


def test_a_resolved_tasks_interior_is_collapsed_except_user_turns() -> None:
    original = task_thread()
    snapshot = [m.model_copy(deep=True) for m in original]
    interior = resolved_task_interiors(original, tasks(AgentTaskStatus.COMPLETED))
    assert interior == {3, 4, 5, 6, 7}  # strictly between the start and the completion
    variants = deletion_pass(original, collapse=interior)
    assert original == snapshot  # the verbatim thread is unchanged
    # Every non-USER message inside collapses wholesale, text included, to one filler.
    assert sorted(variants) == [3, 4, 6, 7]
    assert all(v.content == [AgentCompressionFillerContent()] for v in variants.values())
    for index, variant in variants.items():
        validate_variant(original[index], variant, CompressionTier.DELETED)
    # The user's turn inside, with its viewing context, and the task's boundaries stay.
    view = [variants.get(i, m) for i, m in enumerate(original)]
    assert view[5] == original[5] and CONTEXT in view[5].content
    assert view[1:3] == original[1:3] and view[8:] == original[8:]
    assert [m.role for m in view] == [m.role for m in original]


def test_a_task_that_is_not_resolved_has_no_interior() -> None:
    for status in (AgentTaskStatus.PENDING, AgentTaskStatus.IN_PROGRESS):
        assert resolved_task_interiors(task_thread(), tasks(status)) == set()
    assert resolved_task_interiors(task_thread(), []) == set()
    # Cancelled counts as resolved.
    assert resolved_task_interiors(task_thread(), tasks(AgentTaskStatus.CANCELLED)) == {
        3,
        4,
        5,
        6,
        7,
    }
    # Resolved on the list, but the thread does not say where it began or ended.
    thread = task_thread()
    assert resolved_task_interiors(thread[3:], tasks(AgentTaskStatus.COMPLETED)) == set()
    assert resolved_task_interiors(thread[:8], tasks(AgentTaskStatus.COMPLETED)) == set()
    # A start that failed opens nothing; a completion of another task closes nothing.
    failed = [*thread[:2], task_result("s1", "start_task", status="error"), *thread[3:]]
    assert resolved_task_interiors(failed, tasks(AgentTaskStatus.COMPLETED)) == set()
    other = [*thread[:8], task_call("c1", "complete_task", 2), *thread[9:]]
    assert resolved_task_interiors(other, tasks(AgentTaskStatus.COMPLETED)) == set()


def test_collapsing_keeps_tool_exchanges_whole() -> None:
    # t2's call lies inside the interior, its result after the task ended: both halves go.
    thread = task_thread()
    late_result = thread.pop(7)
    thread.insert(9, late_result)
    interior = resolved_task_interiors(thread, tasks(AgentTaskStatus.COMPLETED))
    assert interior == {3, 4, 5, 6}
    variants = deletion_pass(thread, collapse=interior)
    assert variants[9].content == [AgentCompressionFillerContent()]  # t2's result, outside
    assert 8 not in variants and 10 not in variants  # the completion exchange stays whole
    exchanges = (AgentToolUseContent, AgentToolResultContent)
    assert not any(isinstance(b, exchanges) for v in variants.values() for b in v.content)
