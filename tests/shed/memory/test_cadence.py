"""The Librarian as a whole: its steps in order, its cadence (keeps sweeping while a watched run
is active, stops after the final sweep, cancellable sleep), interrupted runs count as ended,
images reach the summarizer only as markers."""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path

import pytest

import roboz.tools
from roboz import Agent, AgentMode, tool
from roboz.agent.rows import thread_row
from roboz.llm import MockLLMEndpoint
from roboz.models import Image, Message, Role, Str
from roboz.runtime.events import Event, EventPipe
from roboz.shed.agents import librarian
from roboz.shed.capabilities.memory import (
    ArtifactRetention,
    ConversationSnapshots,
    MemoryConsolidation,
)
from roboz.shed.sandbox import Sandbox, SandboxError
from roboz.shed.tools.maintenance import Maintenance
from roboz.shed.tools.snapshots import SnapshotFailed, Snapshots
from roboz.threads import SQLiteThreadStore
from tests.postgres import execute_behind
from tests.shed.memory.conftest import add_run
from tests.shed.memory.summarizer import ScriptedSummarizer


def test_the_librarian_is_deterministic_and_runs_its_steps_in_order(sandbox: Sandbox) -> None:
    definition = librarian(sandbox, ["worker"], agent_endpoint=ScriptedSummarizer())
    assert definition.mode is AgentMode.DETERMINISTIC
    runtime, background = definition.build()
    assert [t.name for t in runtime.default_tools] == [
        "take_snapshots",
        "consolidate_memory",
        "apply_retention",
        "maintenance_cadence",
    ]
    assert background == () and runtime.store is not None


def test_bad_librarian_input(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="scoped"):
        librarian(Sandbox(tmp_path), ["worker"], agent_endpoint=None)
    with pytest.raises(ValueError, match="names of the agents"):
        librarian(Sandbox(tmp_path).scoped("p"), [], agent_endpoint=None)
    with pytest.raises(ValueError, match="cannot watch itself"):
        librarian(Sandbox(tmp_path).scoped("p"), ["librarian"], agent_endpoint=None)


def test_the_librarian_takes_its_steps_settings(sandbox: Sandbox) -> None:
    store = SQLiteThreadStore(sandbox.run_store)
    for index in range(3):
        add_run(store, f"old{index}", [f"fact: number {index}"])
    add_run(store, "wordy", ["fact: " + "long " * 40])
    summarizer = ScriptedSummarizer()
    definition = librarian(
        sandbox,
        ["worker"],
        agent_endpoint=summarizer,
        interval_s=0.5,
        snapshots=ConversationSnapshots(max_snapshot_tokens=30, max_attempts=1),
        consolidation=MemoryConsolidation(max_memory_tokens=500),
        retention=ArtifactRetention(max_runs=1),
    )
    events: list[Event] = []
    definition.event_pipe.subscribe(events.append)
    runtime, _ = definition.build()
    stop, _ = runtime.invoke()  # nothing watched is active: one sweep, the final one
    assert "final sweep" in stop.value
    failed = [e for e in events if isinstance(e, SnapshotFailed)]
    # The snapshot budget: the wordy run's snapshot does not fit in 30 tokens, after 1 attempt.
    assert [e.thread_id for e in failed] == ["wordy"] and "30 tokens" in failed[0].reason
    # Retention keeps one of the three snapshotted runs; the unsnapshotted one stays.
    left = {r.thread_id for r in store.list_runs(["worker"])}
    assert left == {"old2", "wordy"}
    store.close()


def test_the_librarians_settings_must_be_its_capabilities(sandbox: Sandbox) -> None:
    with pytest.raises(
        TypeError, match=r"librarian\(retention=...\) must be an instance of ArtifactRetention"
    ):
        librarian(sandbox, ["worker"], agent_endpoint=None, retention={"max_runs": 3})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="instance of ConversationSnapshots"):
        librarian(sandbox, ["worker"], agent_endpoint=None, snapshots=MemoryConsolidation())  # type: ignore[arg-type]


def test_it_sweeps_while_a_run_is_active_and_stops_after_the_final_sweep(
    sandbox: Sandbox,
) -> None:
    store = SQLiteThreadStore(sandbox.run_store)
    lease = add_run(store, "live", ["fact: still working"], close=False)
    runtime, _ = librarian(
        sandbox, ["worker"], agent_endpoint=ScriptedSummarizer(), interval_s=0.02
    ).build()
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(runtime.invoke()[0]))
    worker.start()
    time.sleep(0.3)
    assert not done  # the watched run is active: it keeps sweeping
    assert store.list_snapshots("p") == []  # below the threshold while it runs
    store.close_run(lease)  # type: ignore[arg-type]  # ends without any event in this process
    worker.join(10)
    assert done and "final sweep" in done[0].value  # type: ignore[attr-defined]
    assert [r.thread_id for r in store.list_snapshots("p")] == ["live"]
    store.close()


def test_a_sleeping_librarian_can_be_cancelled(sandbox: Sandbox) -> None:
    store = SQLiteThreadStore(sandbox.run_store)
    lease = add_run(store, "live", ["fact: x"], close=False)
    runtime, _ = librarian(
        sandbox, ["worker"], agent_endpoint=ScriptedSummarizer(), interval_s=600
    ).build()
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(runtime.invoke()[0])
        except Exception as error:
            outcome.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.2)
    started = time.monotonic()
    runtime.cancel()
    worker.join(10)
    assert outcome and time.monotonic() - started < 5
    store.close_run(lease)  # type: ignore[arg-type]
    store.close()


def test_an_interrupted_run_counts_as_ended(maintenance: Maintenance) -> None:
    store = maintenance.store
    add_run(store, "crashed", ["fact: before the crash"], close=False)
    # Its process is gone.
    execute_behind(store, "UPDATE threads SET lease_pid = 999999999, lease_start = 'gone'")
    Snapshots(maintenance, ScriptedSummarizer(), threshold_tokens=10**6).sweep([])
    (record,) = store.list_snapshots("p")
    assert (record.first_seq, record.last_seq) == (0, 1)  # the message and the notice
    text = (maintenance.sandbox.snapshots_dir / f"{record.snapshot_id}.md").read_text()
    assert "fact: before the crash" in text


def test_images_reach_the_summarizer_as_markers(maintenance: Maintenance) -> None:
    store = maintenance.store
    data = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
    message = Message(
        role=Role.USER,
        content="fact: look",
        images=[Image(url=data), Image(url="https://example.org/cat.png")],
    )
    lease, _, _ = store.open_run(
        "pics",
        org_id="local",
        created_by="worker",
        created_from_agent_id="worker",
        initial=[thread_row(message, 0, None, 0)],
    )
    store.close_run(lease)
    summarizer = ScriptedSummarizer()
    Snapshots(maintenance, summarizer).sweep([])
    (prompt,) = summarizer.prompts
    assert "[image 1]" in prompt and "[image: https://example.org/cat.png]" in prompt
    assert "base64" not in prompt


def test_a_watched_run_ending_wakes_the_librarian_early(sandbox: Sandbox) -> None:

    release = threading.Event()

    @tool
    def wait(input: Str, messages: list[Message]) -> Str:
        """Wait to be released."""
        release.wait(30)
        return Str(value="released")

    pipe = EventPipe()
    store = SQLiteThreadStore(sandbox.run_store)
    worker = Agent(
        "worker",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "wait", "value": "x"}, {"action": "stop", "value": "done"}]
        ),
        tools=[wait, roboz.tools.stop],
        initial_messages=["fact: the worker worked"],
        store=store,
        event_pipe=pipe,
    )
    working = threading.Thread(target=worker.invoke)
    working.start()
    while not store.list_runs(["worker"]):
        time.sleep(0.01)
    runtime, _ = librarian(
        sandbox, ["worker"], agent_endpoint=ScriptedSummarizer(), interval_s=600, event_pipe=pipe
    ).build()
    outcome: list[object] = []
    sweeping = threading.Thread(target=lambda: outcome.append(runtime.invoke()[0]))
    sweeping.start()
    time.sleep(0.2)
    assert not outcome  # asleep for up to 600 s
    release.set()
    working.join(10)
    sweeping.join(10)
    assert outcome and "final sweep" in outcome[0].value  # type: ignore[attr-defined]
    (record,) = store.list_snapshots("p")
    assert record.thread_id == worker.thread_id
    assert store.list_memory_versions("p")
    store.close()
