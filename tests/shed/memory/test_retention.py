"""Retention over 1,000 synthetic runs keeps what it must: active and unsnapshotted runs,
pending snapshots and the latest memory; deleting twice is a no-op, and nothing deleted is
made again. (The thousand runs are SQLite's; PostgreSQL, whose every write is a round trip to the
server, gets a hundred of the same, which exercise the same logic in a tenth of the time.)"""

from __future__ import annotations

from roboz.runtime.events import Event, EventPipe, use_pipe
from roboz.shed.tools.consolidation import Consolidation, memory_path, snapshot_path
from roboz.shed.tools.maintenance import Maintenance
from roboz.shed.tools.retention import Retention
from roboz.shed.tools.snapshots import Snapshots
from tests.shed.memory.conftest import add_run, append
from tests.shed.memory.summarizer import ScriptedSummarizer


def test_retention_over_a_thousand_runs(maintenance: Maintenance, backend: str) -> None:
    count = 1000 if backend == "sqlite" else 100
    late = range(count - 10, count - 5)
    store = maintenance.store
    summarizer = ScriptedSummarizer()
    snapshots = Snapshots(maintenance, summarizer)
    consolidation = Consolidation(maintenance, summarizer, max_batch=1000, max_memory_tokens=10**5)
    for index in range(count):
        add_run(store, f"r{index:04d}", [f"fact: {index}"])
    snapshots.sweep([])
    consolidation.sweep([])  # everything so far goes into memory version 1
    for index in late:
        append(store, f"r{index:04d}", "fact: late")  # new messages, not snapshotted yet
    leases = [add_run(store, f"live{i}", ["fact: busy"], close=False) for i in range(3)]
    snapshots.threshold_tokens = 10**6
    consolidation.max_batch = 1
    for extra in range(3):  # three more memory versions, one snapshot each
        add_run(store, f"extra{extra}", ["fact: more"])
        run = next(r for r in maintenance.runs() if r.thread_id == f"extra{extra}")
        snapshots._snapshot(run, [])
        consolidation.sweep([])
    add_run(store, "fresh", ["fact: pending"])
    snapshots._snapshot(next(r for r in maintenance.runs() if r.thread_id == "fresh"), [])
    assert [r.thread_id for r in store.list_snapshots("p", pending=True)] == ["fresh"]
    calls_before = len(summarizer.prompts)

    retention = Retention(maintenance, max_runs=10, max_snapshots=5, max_memory_versions=2)
    events: list[Event] = []
    with use_pipe(EventPipe([events.append])):
        retention.sweep([])
    left = {r.thread_id: r for r in maintenance.runs()}
    for index in late:
        assert f"r{index:04d}" in left  # not yet snapshotted
    for i in range(3):
        assert f"live{i}" in left  # active
    assert len([r for r in left.values() if not r.active and not r.has_new]) == 10
    live = [r for r in store.list_snapshots("p") if not r.deleted]
    assert len([r for r in live if r.consolidated_in is not None]) == 5
    assert "fresh" in {r.thread_id for r in live}  # pending: kept
    for record in live:
        assert snapshot_path(maintenance.sandbox, record.snapshot_id).exists()
    files = {p.name for p in maintenance.sandbox.snapshots_dir.iterdir()}
    assert files == {f"{r.snapshot_id}.md" for r in live}
    versions = [v for v in store.list_memory_versions("p") if not v.deleted]
    assert [v.version for v in versions] == [3, 4]  # the latest always stays
    for version in store.list_memory_versions("p"):
        assert memory_path(maintenance.sandbox, version).exists() is (not version.deleted)

    # Idempotent, and nothing deleted is made again.
    events.clear()
    with use_pipe(EventPipe([events.append])):
        retention.sweep([])
        snapshots.threshold_tokens = 1
        snapshots.sweep([])  # only the unsnapshotted tails and the live runs are new
    assert not any(type(e).__name__ == "ArtifactsDeleted" for e in events)
    asked = summarizer.prompts[calls_before:]
    assert len(asked) == 8 and not any("thread r0000," in p for p in asked)
    for lease in leases:
        store.close_run(lease)  # type: ignore[arg-type]


def test_the_librarians_own_ended_runs_are_pruned_too(maintenance: Maintenance) -> None:
    maintenance.own = "librarian"
    store = maintenance.store
    for index in range(3):
        add_run(store, f"own{index}", ["prompt"], agent="librarian")
    lease = add_run(store, "own-now", ["prompt"], agent="librarian", close=False)
    add_run(store, "watched", ["fact: not snapshotted"])
    Retention(maintenance, max_runs=1).sweep([])
    left = {r.thread_id for r in store.list_runs(["librarian", "worker"])}
    assert left == {"own2", "own-now", "watched"}
    store.close_run(lease)  # type: ignore[arg-type]
