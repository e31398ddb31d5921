"""The orchestrator and its Librarian end to end on the mock endpoint with the real store: two
runs, with the Librarian snapshotting and consolidating in between, the second starting from
the memory; the summarizer's prompts stay out of the watched agent's thread."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from roboz.agent.background import BackgroundAgentFailed
from roboz.llm import MockLLMEndpoint
from roboz.models import Role
from roboz.runtime.events import AgentFinished, Event
from roboz.shed.agents import orchestrator
from roboz.shed.sandbox import Sandbox
from roboz.shed.tools.consolidation import MemoryConsolidated
from roboz.shed.tools.snapshots import SnapshotTaken
from roboz.threads import SQLiteThreadStore
from tests.shed.memory.summarizer import ScriptedSummarizer


def test_second_run_starts_from_what_the_librarian_made_of_the_first(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path, shared=["shared"]).scoped("garden")
    assert not tmp_path.joinpath("projects").exists()  # describing a layout makes nothing
    summarizer = ScriptedSummarizer()
    agent = MockLLMEndpoint(
        [
            {"action": "stop", "rationale": "noted", "value": "I will water on Mondays"},
            {"action": "stop", "rationale": "recall", "value": "Mondays"},
        ]
    )
    definition = orchestrator(
        sandbox,
        agent_endpoint=agent,
        librarian_endpoint=summarizer,
        initial_messages=["fact: water the roses on Mondays"],
    )
    events: list[Event] = []
    definition.event_pipe.subscribe(events.append)
    runtime, background = definition.build()
    assert [b.name for b in background] == ["librarian"]

    first, _ = runtime.invoke()
    first_thread = runtime.thread_id
    assert first.value == "I will water on Mondays"
    taken = [e for e in events if isinstance(e, SnapshotTaken)]
    assert [e.thread_id for e in taken] == [first_thread]
    assert any(isinstance(e, MemoryConsolidated) and e.version == 1 for e in events)

    definition.set_initial_messages(["When do I water?"])
    runtime, _ = definition.build()
    second, messages = runtime.invoke()
    assert second.value == "Mondays"
    memory = [m for m in messages if m.message_kind == "memory"]
    assert len(memory) == 1 and "fact: water the roses on Mondays" in memory[0].content
    assert memory[0].content.startswith("[Project memory, version 1]")
    # The LLM saw the memory before answering.
    assert "water the roses" in agent.requests[1][-1]["content"]

    with SQLiteThreadStore(sandbox.run_store) as store:
        stored = store.get_thread(first_thread)
        text = " ".join(str(m.content) for m in stored.messages)
        assert "keep the long-term memory" not in text  # no summarizer prompt in its thread
        librarian_runs = store.list_runs(["librarian"])
        assert librarian_runs and not any(r.active for r in librarian_runs)
        prompts = []
        for run in librarian_runs:
            prompts += [r.content for r in store.rows_after(run.thread_id, -1)]
        assert any("Snapshot of thread" in p for p in prompts)  # recorded in its own run
        records = store.list_snapshots("garden")
        # Second run's snapshot made too; no message covered twice.
        by_thread: dict[str, list[tuple[int, int]]] = {}
        for record in records:
            by_thread.setdefault(record.thread_id, []).append((record.first_seq, record.last_seq))
        for spans in by_thread.values():
            spans.sort()
            assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
    assert all(m.role is not Role.SYSTEM or "memory" not in m.content for m in messages[1:])


def test_the_final_sweep_happens_when_the_librarian_starts_after_its_run_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded machine, at its worst: the Librarian's thread gets to run only once the watched
    run is over, so the Librarian never has a step of its own before it is stopped."""
    sandbox = Sandbox(tmp_path).scoped("late")
    definition = orchestrator(
        sandbox,
        agent_endpoint=MockLLMEndpoint(
            [{"action": "stop", "value": "noted"}, {"action": "stop", "value": "Mondays"}]
        ),
        librarian_endpoint=ScriptedSummarizer(),
        initial_messages=["fact: water the roses on Mondays"],
    )
    parent_ended = threading.Event()
    events: list[Event] = []

    def hear(event: Event) -> None:
        events.append(event)
        if isinstance(event, AgentFinished) and event.agent == "orchestrator":
            parent_ended.set()

    definition.event_pipe.subscribe(hear)
    start = threading.Thread.start

    def start_late(thread: threading.Thread) -> None:
        if thread.name.startswith("roboz-background-"):
            run = thread.run

            def late() -> None:
                parent_ended.wait(10)
                run()

            thread.run = late  # type: ignore[method-assign]
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_late)
    runtime, _ = definition.build()
    runtime.invoke()
    first_thread = runtime.thread_id
    assert [e.thread_id for e in events if isinstance(e, SnapshotTaken)] == [first_thread]
    assert any(isinstance(e, MemoryConsolidated) and e.version == 1 for e in events)
    assert not any(isinstance(e, BackgroundAgentFailed) for e in events)

    parent_ended.clear()
    definition.set_initial_messages(["When do I water?"])
    runtime, _ = definition.build()
    _, messages = runtime.invoke()
    second_thread = runtime.thread_id
    memory = [m for m in messages if m.message_kind == "memory"]
    assert len(memory) == 1 and "fact: water the roses on Mondays" in memory[0].content

    with SQLiteThreadStore(sandbox.run_store) as store:
        prompts = [
            row.content
            for run in store.list_runs(["librarian"])
            for row in store.rows_after(run.thread_id, -1)
        ]
    # Both final sweeps recorded their prompts in a Librarian run (never in an ended run's
    # conversation, which is written no more).
    for thread in (first_thread, second_thread):
        assert any(f"Snapshot of thread {thread}" in p for p in prompts)
