"""Client tools in durable turns: the turn ends waiting for the client, and the results
continue it as a new turn, on whichever worker, once."""

from __future__ import annotations

import json

import psycopg
import pytest

from roboz.agent.client_tools import ClientToolError, ClientToolUse
from roboz.durable import DurableClient
from tests.durable.conftest import Worker
from tests.durable.test_runs import assert_contiguous, thread_rows

LOOKUP = {
    "name": "lookup",
    "description": "Look something up on the client.",
    "input_schema": {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    },
}


def status_and_waiting(url: str, thread_id: str) -> tuple[str, list[str]]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT status, meta FROM roboz.threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
    assert row is not None
    return str(row[0]), json.loads(row[1])["run_context"]["waiting_for"]


def test_a_client_tool_turn_waits_and_its_results_continue_it_on_another_worker(
    durable_url: str, workers: list[Worker]
) -> None:
    first = Worker(durable_url, "host-a:roboz:0", ROBOZ_TEST_STEPS="0")
    with DurableClient(durable_url) as client:
        handle = client.enqueue(
            "worker", "look it up", thread_id="ct", turn=1, client_tools=[LOOKUP]
        )
        waiting = handle.result(timeout=60)
        assert waiting.output is None
        (use,) = waiting.pending
        assert use == ClientToolUse(f"tu_{waiting.last_seq}", "lookup", {"q": "answer"})
        assert status_and_waiting(durable_url, "ct") == ("client_tool_turn", [use.tool_use_id])
        written = thread_rows(durable_url, "ct")
        # Wrong results are refused before anything is queued; a new user turn by the worker.
        with pytest.raises(ClientToolError, match="waits for results of"):
            client.submit_tool_results("worker", "ct", {"tu_999": "x"})
        with pytest.raises(ClientToolError, match="submit them with submit_tool_results"):
            client.enqueue("worker", "go", thread_id="ct", turn=2).result(timeout=60)
        assert thread_rows(durable_url, "ct") == written
        assert status_and_waiting(durable_url, "ct") == ("client_tool_turn", [use.tool_use_id])
        first.kill()  # the results continue the turn wherever a worker runs
        workers.append(Worker(durable_url, "host-b:roboz:0", ROBOZ_TEST_STEPS="0"))
        results = {use.tool_use_id: {"found": 42}}
        done = client.submit_tool_results("worker", "ct", results).result(timeout=60)
        assert done.output is not None and "42" in str(done.output.value)
        assert done.first_seq == waiting.last_seq + 1  # the result it recorded
        again = client.submit_tool_results("worker", "ct", results)  # a retried submission
        assert again.result(timeout=5) == done
        with pytest.raises(ClientToolError, match="not waiting for client tool results"):
            client.submit_tool_results("worker", "ct", results, turn="other")
    rows = thread_rows(durable_url, "ct")
    assert_contiguous(rows)
    messages = [json.loads(extras) for _, _, extras in rows]
    results_rows = [m for m in messages if m.get("caller") == "lookup" and "found" in m["content"]]
    assert len(results_rows) == 1  # recorded once
    assert status_and_waiting(durable_url, "ct") == ("user_turn", [])
