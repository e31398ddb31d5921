"""Bad input to a persisted run: a clear error naming the file, before the run starts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import roboz.tools
from roboz import Agent
from roboz.agent.errors import AgentConfigurationError
from roboz.llm import MockLLMEndpoint
from roboz.threads import SchemaVersionError, SQLiteThreadStore, ThreadStoreError


def agent(store: SQLiteThreadStore, endpoint: MockLLMEndpoint) -> Agent:
    return Agent(name="a", agent_endpoint=endpoint, tools=[roboz.tools.stop], store=store)


@pytest.mark.parametrize("bad", ["", "has space", "../etc/passwd", "x" * 129, "-lead", "é"])
def test_unknown_thread_id_format_is_refused_before_the_run(tmp_path: Path, bad: str) -> None:
    endpoint = MockLLMEndpoint([{"action": "stop", "value": "x"}])
    with SQLiteThreadStore(tmp_path / "t.db") as store:
        with pytest.raises(AgentConfigurationError, match=r"not a thread id.*t\.db"):
            agent(store, endpoint).invoke(thread_id=bad)
        assert endpoint.calls == 0 and store.list_threads() == []


def test_read_only_store_is_refused_when_the_agent_is_built(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    SQLiteThreadStore(path).close()
    with SQLiteThreadStore(path, read_only=True) as reader:
        assert reader.list_threads() == []  # reading works
        with pytest.raises(AgentConfigurationError, match=rf"{path}.*read-only"):
            agent(reader, MockLLMEndpoint([]))


def test_read_only_open_of_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ThreadStoreError, match="nothing.db"):
        SQLiteThreadStore(tmp_path / "nothing.db", read_only=True)


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(ThreadStoreError, match=rf"{path}.*not a database"):
        SQLiteThreadStore(path)
    assert path.read_bytes().startswith(b"these are my notes")  # left untouched


def test_a_truncated_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SQLiteThreadStore(path) as store:
        run = agent(store, MockLLMEndpoint([{"action": "stop", "value": "x"}] * 50))
        for _ in range(50):
            run.invoke()
    data = path.read_bytes()
    # Damage the file's second half: the pages the runs' messages were written to (the
    # schema's own tables, some of them still empty, come first).
    half = len(data) // 2
    path.write_bytes(data[:half] + b"\xff" * (len(data) - half))
    with pytest.raises(ThreadStoreError, match=str(path)), SQLiteThreadStore(path) as store:
        for thread in store.list_threads(limit=1000):
            store.get_thread(thread.thread_id)


def test_a_schema_from_a_newer_version_is_named(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SQLiteThreadStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(SchemaVersionError, match=rf"{path}.*version 99.*newer"):
        SQLiteThreadStore(path)
    with pytest.raises(SchemaVersionError, match="newer"):
        SQLiteThreadStore(path, read_only=True)
