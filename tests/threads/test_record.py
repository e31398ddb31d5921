"""Messages, thread records, scopes and deltas as plain models (no store)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from roboz.threads import (
    AgentClientContextEntry,
    AgentErrorContent,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadDelta,
    AgentThreadRecord,
    AgentThreadStatus,
    AnalysisScope,
    ClientToolSpec,
    DeltaApplyError,
    ModelProfileResponse,
    ThreadOrigin,
    ThreadVisibility,
)
from roboz.threads.context import parse_legacy_context_marker

BASE = {
    "org_id": "org",
    "created_by": "jo",
    "created": "2026-01-01T00:00:00Z",
    "status": "user_turn",
    "continuation_token": "tok",
}


def test_message_text_helper_and_status_checks() -> None:
    message = AgentMessage.text("hello")
    assert message.role is AgentRole.USER and message.is_complete()
    assert message.content == [AgentTextContent(text="hello")]
    assert AgentMessage.text("hi", role=AgentRole.ASSISTANT).role is AgentRole.ASSISTANT
    failed = message.model_copy(update={"status": AgentMessageStatus.FAILED})
    cancelled = message.model_copy(update={"status": AgentMessageStatus.CANCELLED})
    generating = message.model_copy(update={"status": AgentMessageStatus.GENERATING})
    assert failed.is_unsuccessful() and cancelled.is_unsuccessful()
    assert not failed.is_complete() and not generating.is_unsuccessful()
    terminal = {s for s in AgentMessageStatus if s.is_terminal()}
    assert terminal == {
        AgentMessageStatus.COMPLETED,
        AgentMessageStatus.FAILED,
        AgentMessageStatus.CANCELLED,
    }


def test_message_json_round_trip_with_mixed_blocks() -> None:
    message = AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[AgentTextContent(text="a"), AgentErrorContent(error_message="b")],
        status=AgentMessageStatus.FAILED,
    )
    assert AgentMessage.model_validate_json(message.model_dump_json()) == message


def test_malformed_message_json_is_a_validation_error() -> None:
    with pytest.raises(ValueError, match="Invalid JSON"):
        AgentMessage.model_validate_json('{"role": "user", "content": [')
    with pytest.raises(ValueError, match="role"):
        AgentMessage.model_validate_json('{"role": "wizard", "content": [], "status": "completed"}')


@pytest.mark.parametrize("legacy", ["session_id", "chat_id", "thread_id"])
def test_thread_id_accepts_legacy_spellings(legacy: str) -> None:
    record = AgentThreadRecord.model_validate({**BASE, legacy: "th_1"})
    assert record.thread_id == "th_1"
    dumped = json.loads(record.model_dump_json())
    assert dumped["thread_id"] == "th_1" and "session_id" not in dumped


def test_forked_from_accepts_legacy_session_spelling() -> None:
    record = AgentThreadRecord.model_validate(
        {**BASE, "forked_from_session_id": "th_src", "forked_from_message_sequence_num": 3}
    )
    assert record.forked_from_thread_id == "th_src"
    again = AgentThreadRecord.model_validate_json(record.model_dump_json())
    assert again == record


def test_record_defaults_and_read_only_origin() -> None:
    record = AgentThreadRecord.model_validate(BASE)
    assert record.thread_id.startswith("th_") and record.messages == []
    assert record.tasks is None and record.goals is None  # not loaded
    assert record.visibility is ThreadVisibility.PRIVATE
    assert not record.is_read_only()  # None origin means API
    assert not record.model_copy(update={"origin": ThreadOrigin.API}).is_read_only()
    assert record.model_copy(update={"origin": ThreadOrigin.EXTERNAL}).is_read_only()


def test_legacy_context_marker_becomes_a_context_block() -> None:
    legacy = {
        "role": "roboto",
        "status": "completed",
        "content": [{"text": '<ctx>{"dataset_ids": ["ds_9"]}</ctx>'}],
    }
    message = AgentMessage.model_validate(legacy)
    assert len(message.content) == 1
    block = message.content[0]
    assert isinstance(block, AgentClientContextEntry) and block.context.dataset_ids == ["ds_9"]
    # User text that merely mentions the marker is left alone, as is a broken marker.
    user = AgentMessage.model_validate({**legacy, "role": "user"})
    assert isinstance(user.content[0], AgentTextContent)
    assert parse_legacy_context_marker("<ctx>{broken</ctx>") is None
    assert parse_legacy_context_marker("<ctx>[1]</ctx>") is None
    assert parse_legacy_context_marker("say <ctx>{}</ctx> later") is None


def test_analysis_scope_merge_is_field_by_field() -> None:
    template = AnalysisScope(start_time=1, end_time=10)
    assert template.merge(AnalysisScope(end_time=20)) == AnalysisScope(start_time=1, end_time=20)
    assert template.merge(AnalysisScope()) == template
    assert AnalysisScope().merge(AnalysisScope(start_time=0)) == AnalysisScope(start_time=0)
    assert template == AnalysisScope(start_time=1, end_time=10)  # merge does not mutate


def test_apply_delta_none_keeps_and_empty_list_clears() -> None:
    from roboz.threads import AgentTask

    task = AgentTask(task_id=1, position=0, title="do")
    record = AgentThreadRecord.model_validate({**BASE, "tasks": [task.model_dump()], "goals": []})
    unchanged = record.apply_delta(AgentThreadDelta(continuation_token="t2", messages_by_idx={}))
    assert unchanged.tasks == [task] and unchanged.continuation_token == "t2"
    cleared = record.apply_delta(
        AgentThreadDelta(continuation_token="t3", messages_by_idx={}, tasks=[])
    )
    assert cleared.tasks == []
    titled = record.apply_delta(
        AgentThreadDelta(
            continuation_token="t4",
            messages_by_idx={},
            title="T",
            status=AgentThreadStatus.ROBOTO_TURN,
        )
    )
    assert titled.title == "T" and titled.status is AgentThreadStatus.ROBOTO_TURN
    assert record.tasks == [task]  # the original record is untouched


def test_apply_delta_reset_truncates_then_applies() -> None:
    messages = [AgentMessage.text(f"m{i}") for i in range(4)]
    record = AgentThreadRecord.model_validate({**BASE, "messages": messages})
    replacement = AgentMessage.text("new", role=AgentRole.ASSISTANT)
    delta = AgentThreadDelta(
        continuation_token="t", reset_from_message_sequence_num=2, messages_by_idx={2: replacement}
    )
    assert record.apply_delta(delta).messages == [*messages[:2], replacement]


def test_apply_delta_with_a_gap_is_refused() -> None:
    record = AgentThreadRecord.model_validate({**BASE, "messages": [AgentMessage.text("a")]})
    delta = AgentThreadDelta(continuation_token="t", messages_by_idx={3: AgentMessage.text("x")})
    with pytest.raises(DeltaApplyError, match="missed an earlier delta"):
        record.apply_delta(delta)


def test_delta_json_round_trip_keeps_integer_indices() -> None:
    delta = AgentThreadDelta(
        continuation_token="t",
        messages_by_idx={0: AgentMessage.text("a"), 5: AgentMessage.text("b")},
        reset_from_message_sequence_num=5,
        tasks=[],
    )
    again = AgentThreadDelta.model_validate_json(delta.model_dump_json())
    assert again == delta and set(again.messages_by_idx) == {0, 5}
    assert again.tasks == [] and again.goals is None


def test_spec_models() -> None:
    spec = ClientToolSpec(name="pick", description="Pick a file", input_schema={"type": "object"})
    assert ClientToolSpec.model_validate_json(spec.model_dump_json()) == spec
    profile = ModelProfileResponse(id="standard", label="Standard", description="fast")
    assert profile.is_default is False


def test_created_defaults_to_now_in_utc() -> None:
    before = datetime.now(UTC)
    message = AgentMessage.text("x")
    assert message.created.tzinfo is not None and message.created >= before
