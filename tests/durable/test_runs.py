"""Durable turns on real worker processes and a real PostgreSQL: steps, thread rows, kills,
replays, retried requests, pure tools and questions to the user."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest

from roboz.durable import (
    DurableClient,
    DurableError,
    Question,
    TurnFailedError,
    TurnResult,
    WorkflowConflictError,
    idempotency_key,
)
from tests.durable.conftest import Worker
from tests.postgres import Cluster


def thread_rows(url: str, thread_id: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(url) as conn:
        return [
            (int(seq), str(role), str(extras))
            for seq, role, extras in conn.execute(
                "SELECT seq, role, extras FROM roboz.messages WHERE thread_id = %s ORDER BY seq",
                (thread_id,),
            )
        ]


def effects(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {str(k): int(a) for k, a in conn.execute("SELECT key, attempts FROM effects")}


def step_names(client: DurableClient, workflow_id: str) -> list[str]:
    return [str(step["function_name"]) for step in client.dbos.list_workflow_steps(workflow_id)]


def assert_contiguous(rows: list[tuple[int, str, str]]) -> None:
    assert [seq for seq, _, _ in rows] == list(range(len(rows)))


def wait_for(path: Path, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)
    return path.read_text()


def test_a_turn_runs_as_recorded_steps_and_writes_its_thread(
    durable_url: str, workers: list[Worker]
) -> None:
    workers.append(Worker(durable_url, "host-a:roboz:0"))
    with DurableClient(durable_url) as client:
        result = client.enqueue("worker", "go", thread_id="t1", turn=1).result(timeout=60)
        assert isinstance(result, TurnResult)
        assert (result.workflow_id, result.first_seq, result.last_seq) == ("t1/1", 0, 8)
        assert result.output.value.startswith("did 3 steps")
        steps = step_names(client, "t1/1")
        assert steps[0] == "roboz.begin" and steps[-1] == "roboz.write"
        assert steps.count("roboz.llm") == 4  # three effects and the stop
        assert steps.count("roboz.tool.effect") == 3
        keys = {f"t1/1:{i}" for i, name in enumerate(steps, 1) if name == "roboz.tool.effect"}
        # The next turn of the thread starts from what the first one left.
        second = client.enqueue("worker", "again", thread_id="t1", turn=2).result(timeout=60)
        assert (second.first_seq, second.last_seq) == (9, 17)
    rows = thread_rows(durable_url, "t1")
    assert_contiguous(rows)
    assert [role for _, role, _ in rows[:3]] == ["user", "assistant", "roboto"]
    assert json.loads(rows[9][2])["content"] == "again"
    # Each effect keyed by its step's idempotency key, once: the keys are the steps' ids.
    assert set(effects(durable_url)) >= keys and len(effects(durable_url)) == 6
    assert set(effects(durable_url).values()) == {1}
    with psycopg.connect(durable_url) as conn:
        assert conn.execute("SELECT status FROM roboz.threads").fetchone() == ("user_turn",)


def _normalized(rows: list[tuple[int, str, str]], workflow_id: str) -> list[tuple[int, str, str]]:
    return [(seq, role, extras.replace(workflow_id, "WF")) for seq, role, extras in rows]


@pytest.mark.parametrize(("progress", "resumer"), [("1", "same"), ("0", "same"), ("1", "another")])
def test_a_worker_killed_inside_a_tool_step_resumes_exactly_once(
    durable_url: str, workers: list[Worker], tmp_path: Path, progress: str, resumer: str
) -> None:
    """Relaunched under its executor id, the worker resumes the turn itself; a worker of
    another executor id resumes it when told to (``resume_workflow``, what recovery does)."""
    hang = tmp_path / "hang"
    hang.write_text("1")  # the second effect step hangs, after its effect
    events = tmp_path / "events"
    env = {
        "ROBOZ_TEST_HANG": str(hang),
        "ROBOZ_TEST_PROGRESS": progress,
        "ROBOZ_TEST_EVENTS": str(events),
    }
    first = Worker(durable_url, "host-a:roboz:0", **env)
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "go", thread_id="killed", turn=1)
        key = wait_for(Path(f"{hang}.entered"))
        first.kill()
        assert handle.status() == "PENDING"
        assert effects(durable_url)[key] == 1
        written = thread_rows(durable_url, "killed")
        assert_contiguous(written)
        if progress == "1":  # the action of the killed step is in the thread already
            assert json.loads(json.loads(written[-1][2])["content"])["n"] == 1
        else:  # only the user's message: the rest is written when the turn ends
            assert [role for _, role, _ in written] == ["user"]
        hang.write_text("never")
        if resumer == "same":
            workers.append(Worker(durable_url, "host-a:roboz:0", **env))
        else:
            workers.append(Worker(durable_url, "host-b:roboz:0", **env))
            time.sleep(0.5)
            assert handle.status() == "PENDING"  # launch recovers only its own executor's
            client.dbos.resume_workflow(handle.workflow_id)
        resumed = handle.result(timeout=60)
        assert resumed.output.value.startswith("did 3 steps")
        # Each event once across both workers: the resumed one replayed the first part
        # silently, the killed one had sent it.
        seen = events.read_text().splitlines()
        assert seen.count("ToolStarted:effect") == seen.count("ToolFinished:effect") == 3
        assert seen.count("AgentStarted:") == seen.count("AgentFinished:") == 1
        assert seen.count("LLMRequested:") == 4
        # An uninterrupted run of the same turn, for comparison.
        client.enqueue("worker", "go", thread_id="calm", turn=1).result(timeout=60)
    done = effects(durable_url)
    killed_keys = {k: a for k, a in done.items() if k.startswith("killed/1:")}
    assert len(killed_keys) == 3  # three effects, each once
    assert killed_keys[key] == 2  # the killed step ran twice; its effect counted once
    rows = thread_rows(durable_url, "killed")
    assert_contiguous(rows)
    # Replay determinism: the resumed thread is the uninterrupted one, row for row.
    assert _normalized(rows, "killed/1") == _normalized(thread_rows(durable_url, "calm"), "calm/1")


def test_a_worker_killed_inside_a_thread_write_writes_it_once(
    durable_url: str, workers: list[Worker]
) -> None:
    # The test holds the step record the worker's last write (the one ending the turn, step 9
    # after begin, four LLM calls and three tool steps) will insert, so that write blocks
    # inside its transaction, after inserting its thread rows and before committing.
    holder = psycopg.connect(durable_url)
    holder.execute(
        "INSERT INTO dbos.datasource_outputs (workflow_id, step_id, created_at) VALUES ('w/1', 9, 0)"
    )
    first = Worker(durable_url, "host-a:roboz:0")
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "go", thread_id="w", turn=1)
        deadline = time.monotonic() + 30
        with psycopg.connect(durable_url, autocommit=True) as watch:
            while not watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%datasource_outputs%'"
            ).fetchone()[0]:  # type: ignore[index]
                assert time.monotonic() < deadline, "the write never blocked"
                time.sleep(0.02)
        # Its rows (the last tool's result, the stop) are written but not visible: they
        # commit with the step's record or not at all. (Each tool step wrote the rows before
        # it, up to the action it ran.)
        assert [seq for seq, _, _ in thread_rows(durable_url, "w")] == list(range(6))
        first.kill()
        holder.rollback()
        holder.close()
        workers.append(Worker(durable_url, "host-a:roboz:0"))
        assert handle.result(timeout=60).output.value.startswith("did 3 steps")
        assert step_names(client, "w/1")[8] == "roboz.write"  # the step that was held
        client.enqueue("worker", "go", thread_id="calm", turn=1).result(timeout=60)
    rows = thread_rows(durable_url, "w")
    assert_contiguous(rows)
    assert _normalized(rows, "w/1") == _normalized(thread_rows(durable_url, "calm"), "calm/1")


def test_a_postgres_restart_mid_turn_is_survived(
    postgres_cluster: Cluster, durable_url: str, workers: list[Worker], tmp_path: Path
) -> None:
    hang = tmp_path / "hang"
    hang.write_text("1")
    workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_HANG=str(hang)))
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "go", thread_id="pg", turn=1)
        wait_for(Path(f"{hang}.entered"))
        postgres_cluster.stop()  # every connection of the worker and the client goes
        postgres_cluster.start()
        hang.write_text("go on")  # the step finishes while DBOS and the writes reconnect
        assert handle.result(timeout=60).output.value.startswith("did 3 steps")
    assert_contiguous(thread_rows(durable_url, "pg"))
    assert sorted(effects(durable_url).values()) == [1, 1, 1]


def test_a_retried_request_returns_the_existing_run_and_another_input_is_refused(
    durable_url: str, workers: list[Worker]
) -> None:
    workers.append(Worker(durable_url, "host-a:roboz:0"))
    with DurableClient(durable_url) as client:
        one = client.enqueue("worker", "go", thread_id="r", turn="req-17")
        again = client.enqueue("worker", "go", thread_id="r", turn="req-17")
        assert one.workflow_id == again.workflow_id == "r/req-17"
        assert one.result(timeout=60) == again.result(timeout=60)
        after = client.enqueue("worker", "go", thread_id="r", turn="req-17")  # once finished
        assert after.result(timeout=5) == one.result()
        with pytest.raises(WorkflowConflictError, match=r"'r/req-17' already exists.*'go'"):
            client.enqueue("worker", "something else", thread_id="r", turn="req-17")
        assert len(client.dbos.list_workflows(workflow_id_prefix="r/")) == 1
        # Without a turn the client numbers the thread's turns.
        assert client.enqueue("worker", "go", thread_id="n").workflow_id == "n/1"
        assert client.enqueue("worker", "go", thread_id="n").workflow_id == "n/2"
    assert len([r for r in thread_rows(durable_url, "r") if r[1] == "user"]) == 1
    assert len(effects(durable_url)) >= 3


def test_a_pure_tool_costs_no_step(durable_url: str, workers: list[Worker]) -> None:
    workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0"))
    with DurableClient(durable_url) as client:
        result = client.enqueue("worker", "double it", thread_id="p", turn=1).result(timeout=60)
        steps = step_names(client, "p/1")
    assert "42" in result.output.value
    assert not any(name.startswith("roboz.tool.double") for name in steps)
    assert steps.count("roboz.llm") == 2
    tool_rows = [json.loads(e) for _, role, e in thread_rows(durable_url, "p") if role == "roboto"]
    assert tool_rows[0]["caller"] == "double" and '"value":42' in tool_rows[0]["content"]


def test_ask_user_waits_durably_and_is_answered_from_another_process(
    durable_url: str, workers: list[Worker]
) -> None:
    first = Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0")
    with DurableClient(durable_url) as client:
        handle = client.enqueue("worker", "ask me", thread_id="q", turn=1)
        assert handle.question(timeout=30) == Question(0, "how many?")
        # The question is in the thread while the turn waits.
        assert "how many?" in thread_rows(durable_url, "q")[-1][2]
        first.kill()  # the wait survives its worker
        handle.answer("four")
        handle.answer("four")  # a retried answer is delivered once
        workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0"))
        result = handle.result(timeout=60)
        assert handle.question() is None
        with pytest.raises(DurableError, match="not waiting for the user"):
            handle.answer("five")
    assert "four" in result.output.value
    rows = thread_rows(durable_url, "q")
    assert_contiguous(rows)
    assert sum('"four"' in extras or "four" in extras for _, _, extras in rows) >= 1


def test_idempotency_key_outside_a_durable_step_is_an_error() -> None:
    with pytest.raises(DurableError, match="only inside a tool step of a durable run"):
        idempotency_key()


def test_turns_of_one_thread_never_overlap(durable_url: str, workers: list[Worker]) -> None:
    workers.append(Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_LIMITS="2,3"))
    workers.append(Worker(durable_url, "host-b:roboz:0", ROBOZ_TEST_LIMITS="2,3"))
    with DurableClient(durable_url) as client:
        queue = client.dbos.retrieve_queue("roboz")
        assert queue is not None
        assert (queue.partition_concurrency, queue.worker_concurrency) == (1, 2)
        assert queue.global_concurrency == 3
        handles = [client.enqueue("worker", f"turn {i}", thread_id="o", turn=i) for i in range(4)]
        results = [h.result(timeout=60) for h in handles]
    spans = sorted((r.first_seq, r.last_seq) for r in results)
    assert spans == [(i * 9, i * 9 + 8) for i in range(4)]  # each turn's rows in one block
    rows = thread_rows(durable_url, "o")
    assert_contiguous(rows)
    users = [json.loads(e)["content"] for _, role, e in rows if role == "user"]
    assert users == [f"turn {i}" for i in range(4)]  # in the order they were enqueued


def test_a_failed_turn_raises_and_leaves_its_thread_to_the_user(
    durable_url: str, workers: list[Worker]
) -> None:
    workers.append(Worker(durable_url, "host-a:roboz:0"))
    with DurableClient(durable_url) as client:
        with pytest.raises(
            TurnFailedError, match="agent 'worker': the LLM reply was still unusable"
        ):
            client.enqueue("worker", "fail", thread_id="f", turn=1).result(timeout=60)
        assert client.retrieve("f/1").status() == "ERROR"
        assert step_names(client, "f/1").count("roboz.llm") == 3  # each repair attempt a step
        with pytest.raises(DurableError, match="serves no agent 'nobody'.*worker"):
            client.enqueue("nobody", "go", thread_id="g", turn=1).result(timeout=60)
        # The thread takes the next turn.
        client.enqueue("worker", "go", thread_id="f", turn=2).result(timeout=60)
    rows = thread_rows(durable_url, "f")
    assert_contiguous(rows)
    kinds = [json.loads(extras).get("message_kind") for _, _, extras in rows]
    assert kinds[:7] == [
        None,
        "rejected_reply",
        "repair",
        "rejected_reply",
        "repair",
        "rejected_reply",
        None,
    ]
