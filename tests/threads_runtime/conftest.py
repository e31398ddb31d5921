"""Thread-runtime tests run real agents on the mock endpoint against a real store, once on
SQLite and once on PostgreSQL (a new schema in the session's throwaway cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roboz.threads import AgentThreadDelta, AgentThreadRecord, ThreadStore
from tests.postgres import open_store


@pytest.fixture
def store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ThreadStore]:
    opened = open_store(backend, tmp_path, request)
    yield opened
    opened.close()


class HeldThread:
    """What a user interface holds: a record it only ever updates with ``apply_delta``."""

    def __init__(self, store: ThreadStore, thread_id: str) -> None:
        self.store = store
        self.record = store.get_thread(thread_id)
        self.deltas: list[AgentThreadDelta] = []

    def sync(self) -> AgentThreadDelta:
        delta = self.store.delta_since(self.record.thread_id, self.record.continuation_token)
        self.record = self.record.apply_delta(delta)
        self.deltas.append(delta)
        return delta

    def matches_store(self) -> AgentThreadRecord:
        """Assert the held record is what the store has now, and return the stored one."""
        stored = self.store.get_thread(self.record.thread_id)
        held = self.record
        assert [m.model_dump() for m in held.messages] == [m.model_dump() for m in stored.messages]
        assert (held.status, held.tasks, held.goals) == (stored.status, stored.tasks, stored.goals)
        return stored
