"""``roboz serve --durable`` with real processes: a real ``roboz serve`` and a real ``roboz
worker`` over a fresh database of a throwaway PostgreSQL cluster. A turn sent over HTTP runs
on the worker and its deltas reach an SSE client of the server (the streams' keepalive is
600 s, so only the worker's NOTIFY can bring them); client tool results continue it there; a
cancel over HTTP stops it."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from roboz.server import ThreadApiError, ThreadClient, is_idle
from roboz.threads import (
    AgentClientContextEntry,
    AgentErrorContent,
    AgentMessageStatus,
    AgentThreadRecord,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
    AnalysisScope,
    Caller,
    ClientToolSpec,
    ClientViewingContext,
)
from tests.durable.workers_support import WorkerProcess, fresh_database, prepare, rows
from tests.server.test_serve_cli import ServeProcess, roboz

APP = "tests.server.durable_app:runs"
CONFIRM = ClientToolSpec(
    name="confirm",
    description="Ask the user a yes/no question.",
    input_schema={"type": "object", "properties": {"question": {"type": "string"}}},
)


@pytest.fixture
def durable_url(postgres_cluster: Any) -> str:
    url = fresh_database(postgres_cluster.url)
    prepare(url)
    return url


class Pair:
    """A server and a worker over one database, and bob's token."""

    def __init__(self, url: str, tmp_path: Path, step_s: float) -> None:
        from roboz.threads.postgres import PostgresThreadStore

        with PostgresThreadStore(url) as store:
            self.token = store.create_api_token(Caller("bob", "acme"))[1]
        self.worker = WorkerProcess(
            url,
            f"t{os.getpid()}",
            tmp_path / "worker.log",
            app=APP,
            queue="served",
            env={"ROBOZ_TEST_STEP_S": str(step_s)},
        )
        self.worker.start().wait_serving()
        self.server = ServeProcess(
            ["--app", APP, "--durable", "--url", url, "--keepalive", "600"], tmp_path
        )
        self.url = url

    def client(self) -> ThreadClient:
        return ThreadClient(self.server.url, self.token, timeout=30)

    def stop(self) -> None:
        if self.server.process.poll() is None:
            self.server.stop()
        self.worker.stop()


@pytest.fixture
def pair(durable_url: str, tmp_path: Path) -> Iterator[Callable[[float], Pair]]:
    started: list[Pair] = []

    def start(step_s: float = 0.2) -> Pair:
        made = Pair(durable_url, tmp_path, step_s)
        started.append(made)
        return made

    yield start
    for made in started:
        made.stop()


def follow(
    pair: Pair,
    record: AgentThreadRecord,
    until: Callable[[AgentThreadRecord], bool] = is_idle,
    timeout_s: float = 60,
) -> list[AgentThreadRecord]:
    """The thread after each delta of its SSE stream from ``record``, until ``until`` holds.
    Read on a thread of its own, so a stream that never hears of the worker's writes (its
    keepalive is 600 s) fails the test instead of hanging it."""
    grown: list[AgentThreadRecord] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            with pair.client() as watcher:
                stream = watcher.stream_deltas(record.thread_id, record=record, until_idle=False)
                for thread in stream:
                    grown.append(thread)
                    if until(thread):
                        stream.close()
                        return
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(timeout_s), f"the stream saw {len(grown)} deltas in {timeout_s} s"
    assert not errors, errors
    return grown


def work_results(thread: AgentThreadRecord) -> list[dict[str, Any]]:
    return [
        block.payload
        for message in thread.messages
        for block in message.content
        if isinstance(block, AgentToolResultContent)
        and block.tool_name == "work"
        and isinstance(block.payload, dict)
    ]


def test_a_turn_sent_over_http_runs_on_the_worker_and_streams_to_an_sse_client(
    pair: Callable[[float], Pair],
) -> None:
    served = pair(0.2)
    with served.client() as bob:
        thread = bob.create_thread(title="durable")
        started = bob.send_message(
            thread.thread_id,
            "work 4",
            scope=AnalysisScope(start_time=5),
            viewing_context=ClientViewingContext(dataset_ids=["ds_1"]),
        )
        assert started.durable_turn is not None
        grown = follow(served, thread)
        final = grown[-1]
        assert final.model_dump() == bob.get_thread(thread.thread_id).model_dump()
    # The turn's writes reached the stream as it went, not only at its end.
    assert len(grown) >= 4, [len(g.messages) for g in grown]
    assert final.status is AgentThreadStatus.USER_TURN
    results = work_results(final)
    assert [r["n"] for r in results] == [0, 1, 2, 3]
    assert {r["pid"] for r in results} == {served.worker.pid}  # run by the worker process
    assert {json.loads(r["scope"])["start_time"] for r in results} == {5}
    assert {json.loads(r["viewing"])["dataset_ids"][0] for r in results} == {"ds_1"}
    user = final.messages[0]
    contexts = [b for b in user.content if isinstance(b, AgentClientContextEntry)]
    assert [c.context.dataset_ids for c in contexts] == [["ds_1"]]
    (executor,) = rows(
        served.url,
        "SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s",
        started.durable_turn,
    )
    assert executor[0] == served.worker.executor_id
    assert served.server.stop() == 0


def test_client_tool_results_over_http_continue_the_turn_on_the_worker(
    pair: Callable[[float], Pair],
) -> None:
    served = pair(0.05)
    with served.client() as bob:
        thread = bob.create_thread()
        bob.send_message(thread.thread_id, "ask me", client_tools=[CONFIRM])
        waiting = follow(served, thread)[-1]
        assert waiting.status is AgentThreadStatus.CLIENT_TOOL_TURN
        (use,) = [b for b in waiting.messages[-1].content if isinstance(b, AgentToolUseContent)]
        with pytest.raises(ThreadApiError) as wrong:
            bob.submit_tool_results(thread.thread_id, {"tu_999": "yes"})
        assert wrong.value.status == 400 and wrong.value.code == "invalid_tool_results"
        bob.submit_tool_results(thread.thread_id, {use.tool_use_id: "yes"})
        final = follow(served, waiting)[-1]
    assert final.status is AgentThreadStatus.USER_TURN
    answers = [
        (b.tool_name, b.payload)
        for m in final.messages
        for b in m.content
        if isinstance(b, AgentToolResultContent)
    ]
    assert answers == [("confirm", "yes"), ("stop", {"value": "[confirm result] yes"})]


def test_a_cancel_over_http_stops_the_turn_on_its_worker(
    pair: Callable[[float], Pair],
) -> None:
    served = pair(0.2)
    with served.client() as bob:
        thread = bob.create_thread()
        with pytest.raises(ThreadApiError) as idle:
            bob.cancel(thread.thread_id)
        assert idle.value.status == 409 and idle.value.code == "no_turn_running"
        started = bob.send_message(thread.thread_id, "work 400")
        with pytest.raises(ThreadApiError) as busy:  # one turn at a time, queued or running
            bob.send_message(thread.thread_id, "work 1")
        assert busy.value.status == 409 and busy.value.code == "thread_busy"
        follow(served, thread, until=lambda t: len(work_results(t)) >= 2)
        assert bob.cancel(thread.thread_id) is True
        final = follow(served, thread)[-1]
        assert final.status is AgentThreadStatus.USER_TURN
        last = final.messages[-1]
        assert last.status is AgentMessageStatus.CANCELLED
        assert [b.error_code for b in last.content if isinstance(b, AgentErrorContent)] == [
            "cancelled"
        ]
        (status,) = rows(
            served.url,
            "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s",
            started.durable_turn,
        )
        assert status[0] == "CANCELLED"
        done = len(work_results(final))
        assert done < 400
        time.sleep(1.0)  # five steps' time: the worker does no more of the cancelled turn
        assert len(work_results(bob.get_thread(thread.thread_id))) == done

        # The thread's next turn runs normally.
        before = bob.get_thread(thread.thread_id)
        bob.send_message(thread.thread_id, "work 1")
        after = follow(served, before)[-1]
    assert after.status is AgentThreadStatus.USER_TURN
    assert len(work_results(after)) == done + 1


def test_serve_durable_refuses_what_it_cannot_serve(durable_url: str, tmp_path: Path) -> None:
    for args, words in (
        (["--app", APP], "serve it with --durable"),
        (["--app", "tests.server.agents:helper", "--durable"], "--durable needs --url"),
        (["--app", APP, "--durable", "--store", "x.db"], "--durable needs --url"),
        (["--app", "tests.server.agents:helper", "--queue", "q"], "--queue is for --durable"),
        (["--app", APP, "--durable", "--url", durable_url, "--queue", "other"], "'served'"),
    ):
        done = roboz("serve", "--port", "0", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr
