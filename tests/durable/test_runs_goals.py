"""Goals and tasks in durable turns: given at enqueue, checked by the worker's agent, their
snapshots written with the turn's messages, once, across a killed worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from roboz.durable import DurableClient, DurableError, WorkflowConflictError
from tests.durable.conftest import Worker
from tests.durable.test_runs import assert_contiguous, effects, thread_rows, wait_for


def tasks_and_goals(url: str, thread_id: str) -> tuple[list[Any], list[Any], str]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT tasks, goals, status FROM roboz.threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
    assert row is not None
    return json.loads(row[0] or "[]"), json.loads(row[1] or "[]"), str(row[2])


def test_goals_and_tasks_survive_a_killed_worker_and_are_written_once(
    durable_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    hang = tmp_path / "hang"
    hang.write_text("0")  # the effect step hangs, after the task was created
    env = {"ROBOZ_TEST_HANG": str(hang), "ROBOZ_TEST_STEPS": "0"}
    first = Worker(durable_url, "host-a:roboz:0", **env)
    goal = {"goal_type": "said", "word": "done"}
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "plan", thread_id="g", turn=1, goals=[goal])
        key = wait_for(Path(f"{hang}.entered"))
        # Written with the messages before the tool step: the task, and the pending goal.
        tasks, goals, status = tasks_and_goals(durable_url, "g")
        assert [(t["task_id"], t["title"]) for t in tasks] == [(1, "write it")]
        assert [(g["goal_type"], g["status"]) for g in goals] == [("said", "pending")]
        assert status == "roboto_turn"
        first.kill()
        hang.write_text("never")
        workers.append(Worker(durable_url, "host-a:roboz:0", **env))
        result = handle.result(timeout=60)
        assert result.output.value == "done"
        with pytest.raises(WorkflowConflictError, match="'g/1' already exists"):
            client.enqueue("worker", "plan", thread_id="g", turn=1, goals=[])
        assert (
            client.enqueue("worker", "plan", thread_id="g", turn=1, goals=[goal]).result(timeout=5)
            == result
        )
    tasks, goals, status = tasks_and_goals(durable_url, "g")
    # The replay re-ran create_task on the list the turn began with: one task, not two.
    assert [(t["task_id"], t["title"], t["status"]) for t in tasks] == [(1, "write it", "pending")]
    assert [(g["goal_type"], g["status"], g["goal_data"]["word"]) for g in goals] == [
        ("said", "achieved", "done")
    ]
    assert goals[0]["message_sequence_num"] == result.first_seq
    assert status == "user_turn"
    assert effects(durable_url)[key] == 2  # the killed step ran again (keyed: one effect)
    rows = thread_rows(durable_url, "g")
    assert_contiguous(rows)
    kinds = [json.loads(extras).get("message_kind") for _, _, extras in rows]
    assert kinds.count("goal_reprompt") == 1


def test_unmet_goals_end_the_turn_in_goals_failed_and_unknown_ones_are_refused(
    durable_url: str, workers: list[Worker]
) -> None:
    workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0"))
    with DurableClient(durable_url) as client:
        goal = {"goal_type": "said", "word": "never"}
        result = client.enqueue("worker", "plan", thread_id="f", turn=1, goals=[goal])
        assert result.result(timeout=60).output.value == "done"
        assert tasks_and_goals(durable_url, "f")[1:] == (
            [tasks_and_goals(durable_url, "f")[1][0]],
            "goals_failed",
        )
        assert tasks_and_goals(durable_url, "f")[1][0]["status"] == "failed"
        with pytest.raises(DurableError, match=r"no check for goal type\(s\) mystery"):
            client.enqueue(
                "worker", "plan", thread_id="u", turn=1, goals=[{"goal_type": "mystery"}]
            ).result(timeout=60)
        # The next turn of the failed thread starts from what it left, goals included.
        client.enqueue("worker", "go", thread_id="f", turn=2).result(timeout=60)
    tasks, goals, status = tasks_and_goals(durable_url, "f")
    assert [(g["goal_type"], g["status"]) for g in goals] == [("said", "failed")]
    assert len(tasks) == 1
    assert status == "user_turn"
    with psycopg.connect(durable_url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM roboz.threads WHERE thread_id = 'u'"
        ).fetchone() == (0,)
