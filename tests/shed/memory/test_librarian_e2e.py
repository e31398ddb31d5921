"""The orchestrator and its Librarian end to end on the mock endpoint with the real store: two
runs, with the Librarian snapshotting and consolidating in between, the second starting from
the memory; the summarizer's prompts stay out of the watched agent's thread."""

from __future__ import annotations

import itertools
from pathlib import Path

from roboz.llm import MockLLMEndpoint
from roboz.models import Role
from roboz.runtime.events import Event
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
