"""A persisted run killed with SIGKILL loses nothing committed, reads as interrupted, resumes;
two runs of one thread at once: the second gets a clear error, messages never interleave."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import roboz.tools
from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role, Stop, Str
from roboz.threads import (
    AgentErrorContent,
    AgentThreadStatus,
    ThreadBusyError,
)
from tests.postgres import CHILD_PRELUDE, execute_raw, store_from_spec, store_spec


@pytest.fixture
def spec(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The store of the test (a SQLite file or a PostgreSQL schema), named for a child."""
    return store_spec(backend, tmp_path, request)


CHILD = (
    CHILD_PRELUDE
    + r"""
import json, sys, time
from pathlib import Path
import roboz.tools
from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Str
db, ready = sys.argv[1], Path(sys.argv[2])

@tool
def note(input: Str, messages: list[Message]) -> Str:
    "Take a note."
    return Str(value=f"noted {input.value}")

@tool
def hang(input: Str, messages: list[Message]) -> Str:
    "Wait for a long time."
    ready.write_text(json.dumps(len(messages)))
    time.sleep(600)
    return Str(value="woke")

replies = [{"action": "note", "value": str(i)} for i in range(5)]
replies.append({"action": "hang", "value": "x"})
Agent(
    name="worker",
    agent_endpoint=MockLLMEndpoint(replies),
    tools=[note, hang, roboz.tools.stop],
    initial_messages=["work"],
    store=store_from_spec(db),
).invoke(thread_id="job-1")
"""
)


def start_child(db: str, ready: Path) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, db, str(ready)])
    deadline = time.monotonic() + 30
    while not ready.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the child run did not reach its hanging tool (exit {child.poll()})")
        time.sleep(0.02)
    return child


def stopper(store: Any) -> Agent:
    return Agent(
        name="worker",
        agent_endpoint=MockLLMEndpoint([{"action": "stop", "value": "resumed"}]),
        tools=[roboz.tools.stop],
        store=store,
    )


def test_sigkilled_run_keeps_every_message_reads_interrupted_and_resumes(
    tmp_path: Path, spec: str
) -> None:
    db, ready = spec, tmp_path / "ready"
    child = start_child(db, ready)
    try:
        committed = json.loads(ready.read_text())  # messages the hanging tool saw
        with store_from_spec(db) as store:
            # Readable at once while it runs, and marked as running.
            live = store.get_thread("job-1")
            assert live.status is AgentThreadStatus.ROBOTO_TURN
            assert len(live.messages) == committed
            # A second process continuing the same thread is refused, clearly.
            with pytest.raises(ThreadBusyError, match=rf"job-1.*pid {child.pid}"):
                stopper(store).invoke(thread_id="job-1")
            assert len(store.get_thread("job-1").messages) == committed  # nothing interleaved
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)

            after = store.get_thread("job-1")
            assert after.status is AgentThreadStatus.USER_TURN  # not running forever
            assert len(after.messages) == committed + 1
            notice = after.messages[-1].content[0]
            assert isinstance(notice, AgentErrorContent) and notice.error_code == "interrupted"
            assert str(child.pid) in notice.error_message

            stop, conversation = stopper(store).invoke(
                [Message(role=Role.USER, content="go on")], thread_id="job-1"
            )
            assert isinstance(stop, Stop) and stop.value == "resumed"
            # The resumed conversation is the committed one (the notice is for the UI only).
            assert len(conversation) == committed + 3  # + "go on", the stop action, its result
            assert conversation[0].content == "work"
            assert [m.caller for m in conversation[:committed]].count("note") == 5
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_dead_run_is_recovered_when_resumed_without_reading_first(
    tmp_path: Path, spec: str
) -> None:
    db, ready = spec, tmp_path / "ready"
    child = start_child(db, ready)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    with store_from_spec(db) as store:
        stop, _ = stopper(store).invoke(thread_id="job-1")
        assert isinstance(stop, Stop)
        thread = store.get_thread("job-1")
        codes = [
            b.error_code
            for m in thread.messages
            for b in m.content
            if isinstance(b, AgentErrorContent)
        ]
        assert codes == ["interrupted"]
        assert thread.status is AgentThreadStatus.USER_TURN


def test_two_runs_in_one_process_cannot_share_a_thread(spec: str) -> None:
    with store_from_spec(spec) as store:
        errors: list[str] = []

        @tool
        def meddle(input: Str, messages: list[Message]) -> Str:
            """Try to run the same thread again from inside the run."""
            try:
                stopper(store).invoke(thread_id="shared")
            except ThreadBusyError as error:
                errors.append(str(error))
            return Str(value="tried")

        Agent(
            name="outer",
            agent_endpoint=MockLLMEndpoint(
                [{"action": "meddle", "value": "x"}, {"action": "stop", "value": "ok"}]
            ),
            tools=[meddle, roboz.tools.stop],
            store=store,
        ).invoke(thread_id="shared")
        assert len(errors) == 1 and "already being run" in errors[0]
        assert str(os.getpid()) in errors[0]
        assert store.get_thread("shared").status is AgentThreadStatus.USER_TURN


def test_a_run_that_lost_its_lease_writes_nothing_more(spec: str) -> None:
    with store_from_spec(spec) as store:

        @tool
        def usurp(input: Str, messages: list[Message]) -> Str:
            """Another run takes the thread over behind this one's back."""
            execute_raw(spec, "UPDATE threads SET lease_owner = 'elsewhere|1|x'")
            return Str(value="taken")

        agent = Agent(
            name="outer",
            agent_endpoint=MockLLMEndpoint([{"action": "usurp", "value": "x"}]),
            tools=[usurp, roboz.tools.stop],
            store=store,
        )
        with pytest.raises(ThreadBusyError, match="no longer holds"):
            agent.invoke(thread_id="taken")
        # The action was committed; the tool's result, written after the takeover, was not.
        # (PostgreSQL sees that the made-up owner holds no session and marks the run
        # interrupted: that notice is the store's row, not the run's.)
        messages = store.get_thread("taken").messages
        written = [m for m in messages if not isinstance(m.content[0], AgentErrorContent)]
        assert len(written) == 1
        assert len(messages) == (2 if spec.startswith("postgres:") else 1)


STREAMING_CHILD = (
    CHILD_PRELUDE
    + r"""
import sys, time
from pathlib import Path
import roboz.tools
from roboz import Agent
from roboz.llm import MockLLMEndpoint
db, ready = sys.argv[1], Path(sys.argv[2])

class Stalls(MockLLMEndpoint):
    def complete(self, records, *, on_delta=None, cancel=None):
        on_delta('{"action": "stop", "rationale": "half a thou')
        ready.write_text("streaming")
        time.sleep(600)

Agent(
    name="worker",
    agent_endpoint=Stalls([]),
    tools=[roboz.tools.stop],
    initial_messages=["work"],
    store=store_from_spec(db),
).invoke(thread_id="job-2")
"""
)


def test_a_reply_streaming_when_killed_is_marked_failed(tmp_path: Path, spec: str) -> None:
    from roboz.threads import AgentMessageStatus, AgentTextContent

    db, ready = spec, tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", STREAMING_CHILD, db, str(ready)])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), f"the child never streamed (exit {child.poll()})"
        with store_from_spec(db) as store:
            live = store.get_thread("job-2").messages[-1]
            assert live.status is AgentMessageStatus.GENERATING
            client = store.get_thread("job-2")
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
            after = store.get_thread("job-2")
            draft, notice = after.messages[-2:]
            assert draft.status is AgentMessageStatus.FAILED
            # The prose streamed so far, not the JSON around it.
            assert [b.text for b in draft.content if isinstance(b, AgentTextContent)] == [
                "half a thou"
            ]
            assert isinstance(notice.content[0], AgentErrorContent)
            # A UI that held the live draft follows along without reloading.
            client = client.apply_delta(store.delta_since("job-2", client.continuation_token))
            assert client == after
            stop, conversation = stopper(store).invoke(thread_id="job-2")
            assert isinstance(stop, Stop)
            assert [m.content for m in conversation][0] == "work"
            assert len(conversation) == 3  # the half reply is not part of the conversation
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
