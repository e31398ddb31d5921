"""Cancelling durable turns on real worker processes: in a tool step, waiting on the user,
queued, finished, and with the canceller gone before it could end the thread."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import psycopg
import pytest

from roboz.durable import DurableClient, DurableError, TurnCancelledError
from tests.durable.conftest import Worker
from tests.durable.test_runs import (
    assert_contiguous,
    effects,
    step_names,
    thread_rows,
    wait_for,
)

NOTICE = '{"notice": true}'


def thread_status(url: str, thread_id: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT status FROM roboz.threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
    assert row is not None
    return str(row[0])


def last_content(url: str, thread_id: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT content, status FROM roboz.messages WHERE thread_id = %s "
            "ORDER BY seq DESC LIMIT 1",
            (thread_id,),
        ).fetchone()
    assert row is not None
    return f"{row[1]}:{row[0]}"


def assert_ended_as_cancelled(url: str, thread_id: str, workflow_id: str) -> None:
    rows = thread_rows(url, thread_id)
    assert_contiguous(rows)
    assert rows[-1][1:] == ("roboto", NOTICE)
    assert last_content(url, thread_id).startswith("cancelled:")  # the seed's CANCELLED
    ((kind, block),) = json.loads(last_content(url, thread_id).split(":", 1)[1])
    error = json.loads(block)
    assert (kind, error["error_code"]) == ("error", "cancelled")
    assert error["error_message"] == f"turn '{workflow_id}' was cancelled"
    assert thread_status(url, thread_id) == "user_turn"


def test_a_turn_cancelled_in_a_tool_step_stops_at_the_next_step_and_is_never_resumed(
    durable_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    hang = tmp_path / "hang"
    hang.write_text("1")  # the second effect step hangs, after its effect
    env = {"ROBOZ_TEST_HANG": str(hang)}
    first = Worker(durable_url, "host-a:roboz:0", **env)
    workers.append(first)
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "go", thread_id="c", turn=1)
        key = wait_for(Path(f"{hang}.entered"))
        done = handle.cancel()
        assert (done.cancelled, done.status) == (True, "CANCELLED")
        assert str(done) == "turn 'c/1' cancelled"
        # The thread ends at once, as a cancelled persisted run's does.
        assert_ended_as_cancelled(durable_url, "c", "c/1")
        ended = thread_rows(durable_url, "c")
        with pytest.raises(TurnCancelledError, match=r"turn 'c/1' was cancelled"):
            handle.result(timeout=10)
        llm_calls = step_names(client, "c/1").count("roboz.llm")
        hang.write_text("go on")  # the step in flight finishes; nothing after it starts
        time.sleep(1.5)  # an uncancelled turn finishes in far less (the endpoint is instant)
        assert step_names(client, "c/1").count("roboz.llm") == llm_calls
        assert thread_rows(durable_url, "c") == ended
        assert effects(durable_url)[key] == 1  # the step in flight did its effect, once
        assert handle.status() == "CANCELLED"
        # Relaunched under its executor id, the worker resumes its PENDING turns: not this one.
        first.kill()
        workers.append(Worker(durable_url, "host-a:roboz:0", **env))
        time.sleep(1.0)
        assert handle.status() == "CANCELLED"
        assert step_names(client, "c/1").count("roboz.llm") == llm_calls
        assert effects(durable_url)[key] == 1
        # Cancelling again is harmless; the thread's next turn runs normally after the notice.
        assert handle.cancel().cancelled
        assert thread_rows(durable_url, "c") == ended
        after = client.enqueue("worker", "again", thread_id="c", turn=2).result(timeout=60)
    assert after.output.value.startswith("did 3 steps")
    assert after.first_seq == len(ended)
    rows = thread_rows(durable_url, "c")
    assert_contiguous(rows)
    assert json.loads(rows[len(ended)][2])["content"] == "again"
    assert thread_status(durable_url, "c") == "user_turn"


def test_a_turn_waiting_on_the_user_is_cancelled_at_once(
    durable_url: str, workers: list[Worker]
) -> None:
    worker = Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0")
    workers.append(worker)
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "ask me", thread_id="w", turn=1)
        assert handle.question(timeout=30) is not None
        assert handle.cancel().cancelled
        assert_ended_as_cancelled(durable_url, "w", "w/1")
        with pytest.raises(TurnCancelledError, match="'w/1'"):
            handle.result(timeout=10)
        with pytest.raises(DurableError, match="not waiting for the user"):
            handle.answer("four")
        # The wait woke to stop (DBOS's recv alone would sleep until its timeout, a day):
        # the worker saw the turn's cancellation, and says so, before it is asked to stop.
        time.sleep(1.0)
        worker.stop()
        assert worker.process.stderr is not None
        said = worker.process.stderr.read()
        assert re.search(r"Workflow w/1 (is no longer owned|was cancelled during)", said), said
        workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0"))
        with pytest.raises(DurableError, match="not waiting for the user"):
            handle.answer("four")
        client.enqueue("worker", "double it", thread_id="w", turn=2).result(timeout=60)
    assert_contiguous(thread_rows(durable_url, "w"))


def test_cancelling_a_queued_turn_and_a_finished_one(
    durable_url: str, workers: list[Worker]
) -> None:
    with DurableClient(durable_url) as client:
        queued = client.enqueue("worker", "go", thread_id="q", turn=1)  # no worker yet
        assert queued.cancel().cancelled
        with pytest.raises(DurableError, match="no durable turn 'q/9'"):
            client.cancel("q/9")
        workers.append(Worker(durable_url, "host-a:roboz:0"))
        done = client.enqueue("worker", "go", thread_id="q", turn=2).result(timeout=60)
        assert done.first_seq == 0  # the cancelled turn never touched the thread
        assert queued.status() == "CANCELLED"
        before = thread_rows(durable_url, "q")
        outcome = client.cancel("q/2")
        assert (outcome.cancelled, outcome.status) == (False, "SUCCESS")
        assert str(outcome) == "turn 'q/2' already finished (SUCCESS)"
        assert client.retrieve("q/2").result(timeout=5) == done
    assert thread_rows(durable_url, "q") == before
    assert thread_status(durable_url, "q") == "user_turn"


def test_the_next_turn_ends_a_cancelled_turn_its_canceller_left(
    durable_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    """A canceller that died between DBOS's cancel and ending the thread (here: DBOS's cancel
    called alone) leaves the thread to the next turn, which ends it first."""
    hang = tmp_path / "hang"
    hang.write_text("1")
    workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_HANG=str(hang)))
    with DurableClient(durable_url) as client:
        client.enqueue("worker", "go", thread_id="d", turn=1)
        wait_for(Path(f"{hang}.entered"))
        client.dbos.cancel_workflow("d/1")
        assert thread_status(durable_url, "d") == "roboto_turn"
        left = len(thread_rows(durable_url, "d"))
        hang.write_text("go on")
        after = client.enqueue("worker", "again", thread_id="d", turn=2).result(timeout=60)
    rows = thread_rows(durable_url, "d")
    assert_contiguous(rows)
    assert rows[left][1:] == ("roboto", NOTICE)  # the cancelled turn's end, once
    assert after.first_seq == left + 1
    assert [extras for _, _, extras in rows].count(NOTICE) == 1
    assert thread_status(durable_url, "d") == "user_turn"


def test_the_next_turn_ends_a_turn_that_failed_without_ending_its_thread(
    durable_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    """A turn whose thread write is refused (someone else wrote to the thread while it ran)
    fails with the thread still the agent's; the next turn ends it with a notice first."""
    from roboz.threads import AgentMessage, AgentMessageStatus, AgentRole, AgentTextContent
    from roboz.threads.postgres import PostgresThreadStore

    hang = tmp_path / "hang"
    hang.write_text("0")
    workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_HANG=str(hang)))
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "go", thread_id="x", turn=1)
        wait_for(Path(f"{hang}.entered"))
        store = PostgresThreadStore(durable_url)
        intruder = AgentMessage(
            role=AgentRole.USER,
            content=[AgentTextContent(text="hi")],
            status=AgentMessageStatus.COMPLETED,
        )
        store.append_message("x", intruder)  # takes the sequence number the turn writes next
        hang.write_text("go on")
        with pytest.raises(Exception, match="another writer's message"):
            handle.result(timeout=60)
        assert handle.status() == "ERROR"
        assert thread_status(durable_url, "x") == "roboto_turn"
        left = len(thread_rows(durable_url, "x"))
        after = client.enqueue("worker", "again", thread_id="x", turn=2).result(timeout=60)
    rows = thread_rows(durable_url, "x")
    assert_contiguous(rows)
    assert rows[left][1:] == ("roboto", NOTICE)
    assert "turn 'x/1' ended (ERROR) before finishing" in last_content_at(durable_url, "x", left)
    assert after.first_seq == left + 1
    assert thread_status(durable_url, "x") == "user_turn"


def last_content_at(url: str, thread_id: str, seq: int) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT content FROM roboz.messages WHERE thread_id = %s AND seq = %s",
            (thread_id, seq),
        ).fetchone()
    assert row is not None
    return str(row[0])
