"""The Librarian's ledger in the thread store: runs by agent, coverage, memory versions (on
both backends, through the ``store`` fixture)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from roboz.threads import AgentRole, LibrarianLedger, RunRow, SQLiteThreadStore
from roboz.threads._schema import SCHEMA_VERSION
from tests.postgres import execute_behind


def run(store: LibrarianLedger, thread_id: str, texts: list[str], *, close: bool = True) -> None:
    rows = [RunRow(AgentRole.USER, json.dumps([["text", t]]), '{"role": "user"}') for t in texts]
    lease, _, _ = store.open_run(
        thread_id, org_id="local", created_by="worker", created_from_agent_id="worker", initial=rows
    )
    if close:
        store.close_run(lease)


def test_runs_coverage_and_tails(store: LibrarianLedger) -> None:
    run(store, "a", ["1", "2", "3"])
    run(store, "b", ["1"], close=False)
    runs = {r.thread_id: r for r in store.list_runs(["worker"])}
    assert not runs["a"].active and runs["b"].active
    assert runs["a"].covered_through == -1 and runs["a"].has_new
    assert [r.seq for r in store.rows_after("a", 0)] == [1, 2]
    assert store.record_snapshot("a.0-1", project="p", thread_id="a", first_seq=0, last_seq=1)
    # Overlapping coverage is refused, whoever asks.
    assert not store.record_snapshot("x", project="p", thread_id="a", first_seq=1, last_seq=2)
    assert store.list_runs(["worker"])[0].covered_through == 1
    assert store.list_runs(["nobody"]) == []
    assert store.delete_run("b") is False  # active
    with pytest.raises(ValueError, match="not consolidated"):
        store.forget_artifacts("p", snapshot_ids=["a.0-1"])
    assert store.record_memory_version("p", 0, "d1", ["a.0-1"]) == 1
    assert store.record_memory_version("p", 0, "d2", []) is None  # superseded
    assert store.list_snapshots("p", pending=True) == []
    with pytest.raises(ValueError, match="latest"):
        store.forget_artifacts("p", memory_versions=[1])
    store.forget_artifacts("p", snapshot_ids=["a.0-1"])
    assert store.list_snapshots("p")[0].deleted
    assert store.delete_run("a") and not store.delete_run("a")
    # The tombstone keeps coverage even though the run is gone.
    assert store.list_snapshots("p")[0].last_seq == 1


def test_a_holder_on_another_host_is_the_backends_to_judge(
    store: LibrarianLedger, backend: str
) -> None:
    run(store, "far", ["1"])
    execute_behind(
        store, "UPDATE threads SET lease_owner = 'elsewhere|1|x', lease_pid = 1, lease_start = 'x'"
    )
    (far,) = store.list_runs(["worker"])
    if backend == "sqlite":  # nothing can look at another host's process: it is assumed alive
        assert far.active and not store.delete_run("far")
    else:  # PostgreSQL knows its session (and lock) is gone: the run reads as interrupted
        assert not far.active and far.message_count == 2  # the message and the notice
        assert store.delete_run("far")


def test_version_2_store_migrates(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteThreadStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE snapshots")
        raw.execute("DROP TABLE memory_versions")
        for table in ("pins", "ratings", "api_tokens"):  # version 4's
            raw.execute(f"DROP TABLE {table}")
        raw.execute("PRAGMA user_version = 2")
    with SQLiteThreadStore(path) as store:
        assert store.list_snapshots("p") == []
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
