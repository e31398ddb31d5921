"""Goals, tasks and deltas in roboto's wire format: JSON a roboto client writes reads back
unchanged, and what RoboZ writes has roboto's field names and types."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic import ValidationError

from roboz.threads import (
    AgentGoalStatus,
    AgentTask,
    AgentTaskStatus,
    AgentThreadDelta,
    AgentThreadGoalRecord,
    SQLiteThreadStore,
)
from roboz.threads._schema import SCHEMA_VERSION

ROBOTO_GOAL = {
    "goal_type": "answer_question",
    "goal_data": {"goal_type": "answer_question", "question": "why?", "min_sources": 2},
    "status": "achieved",
    "message_sequence_num": 4,
    "created": "2026-11-30T10:00:00Z",
    "concluded_at": "2026-11-30T10:05:00Z",
    "goal_id": "g_17",  # a field this version does not model: kept
}
ROBOTO_TASK = {
    "task_id": 7,
    "position": 0,
    "title": "Read the logs",
    "status": "in_progress",
    "notes": "from a newer client",
}


def test_goal_round_trips_roboto_json_with_unknown_fields() -> None:
    goal = AgentThreadGoalRecord.model_validate(ROBOTO_GOAL)
    assert goal.status is AgentGoalStatus.ACHIEVED and goal.message_sequence_num == 4
    assert goal.goal_data.goal_type == "answer_question"
    again = json.loads(goal.model_dump_json())
    assert again["goal_id"] == "g_17" and again["goal_data"]["question"] == "why?"
    assert AgentThreadGoalRecord.model_validate(again) == goal
    assert set(again) == set(ROBOTO_GOAL)


def test_goal_data_type_must_match_and_concluded_at_is_optional() -> None:
    pending = {**ROBOTO_GOAL, "status": "pending"}
    del pending["concluded_at"]
    assert AgentThreadGoalRecord.model_validate(pending).concluded_at is None
    with pytest.raises(ValidationError, match="does not match"):
        AgentThreadGoalRecord.model_validate({**ROBOTO_GOAL, "goal_data": {"goal_type": "other"}})
    with pytest.raises(ValidationError):
        AgentThreadGoalRecord.model_validate({**ROBOTO_GOAL, "status": "running"})


def test_task_round_trips_roboto_json_with_unknown_fields() -> None:
    task = AgentTask.model_validate(ROBOTO_TASK)
    assert task.task_id == 7 and task.status is AgentTaskStatus.IN_PROGRESS
    assert json.loads(task.model_dump_json()) == ROBOTO_TASK
    with pytest.raises(ValidationError):
        AgentTask.model_validate({**ROBOTO_TASK, "task_id": "t1"})


def test_store_keeps_unknown_goal_and_task_fields(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u")
    store.set_goals(thread.thread_id, [AgentThreadGoalRecord.model_validate(ROBOTO_GOAL)])
    store.set_tasks(thread.thread_id, [AgentTask.model_validate(ROBOTO_TASK)])
    record = store.get_thread(thread.thread_id)
    assert json.loads(record.model_dump_json())["goals"][0]["goal_id"] == "g_17"
    assert json.loads(record.model_dump_json())["tasks"][0] == ROBOTO_TASK


def test_delta_needs_its_token_and_messages() -> None:
    with pytest.raises(ValidationError, match="messages_by_idx"):
        AgentThreadDelta.model_validate({"continuation_token": "t"})
    with pytest.raises(ValidationError, match="continuation_token"):
        AgentThreadDelta.model_validate({"messages_by_idx": {}})


def test_a_version_1_database_is_migrated_and_old_clients_reload(tmp_path: Path) -> None:
    from roboz.threads import AgentMessage
    from roboz.threads._schema import _SCHEMA_V1

    path = tmp_path / "v1.db"
    raw = sqlite3.connect(path)
    raw.executescript(_SCHEMA_V1)
    raw.execute(
        "INSERT INTO threads (thread_id, org_id, created_by, created, meta, status, "
        "message_count, revision) VALUES ('th_old', 'o', 'u', '2026-01-01T00:00:00+00:00', "
        "'{}', 'user_turn', 1, 3)"
    )
    raw.execute(
        "INSERT INTO messages VALUES ('th_old', 0, 'user', 'completed', "
        "'2026-01-01T00:00:00+00:00', '[[\"text\", \"hi\"]]', 3)"
    )
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    with SQLiteThreadStore(path) as store:
        thread = store.get_thread("th_old")
        assert (
            thread.messages == [thread.messages[0]] and thread.messages[0].content[0].text == "hi"
        )  # type: ignore[union-attr]
        from roboz.threads.tokens import encode_token

        old_client_delta = store.delta_since("th_old", encode_token("th_old", 3))
        assert old_client_delta.reset_from_message_sequence_num == 0
        assert list(old_client_delta.messages_by_idx) == [0]
        store.append_message("th_old", AgentMessage.text("after"))
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
