"""Synthetic watched runs in a real store, and the Librarian's steps around them: the
``maintenance`` fixture keeps its ledger in the sandbox's SQLite run store, then in a new
schema of the session's PostgreSQL cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roboz.agent.rows import thread_row
from roboz.models import Message, Role
from roboz.shed.sandbox import Sandbox
from roboz.shed.tools.maintenance import Maintenance
from roboz.threads import LibrarianLedger
from tests.postgres import open_store


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path).scoped("p").prepare()


@pytest.fixture
def maintenance(
    sandbox: Sandbox, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Maintenance]:
    ledger = None if backend == "sqlite" else open_store(backend, tmp_path, request)
    kept = Maintenance(sandbox, ("worker",), ledger=ledger)
    yield kept
    kept.store.close()


def add_run(
    store: LibrarianLedger,
    thread_id: str,
    texts: list[str],
    *,
    close: bool = True,
    agent: str = "worker",
) -> object:
    """A run of ``agent`` with one user message per text; left holding its lease unless
    ``close`` (an active run of this process)."""
    rows = [
        thread_row(Message(role=Role.USER, content=text), seq, None, 0)
        for seq, text in enumerate(texts)
    ]
    lease, _, _ = store.open_run(
        thread_id, org_id="local", created_by=agent, created_from_agent_id=agent, initial=rows
    )
    if close:
        store.close_run(lease)
    return lease


def append(store: LibrarianLedger, thread_id: str, text: str) -> None:
    lease, rows, _ = store.open_run(
        thread_id, org_id="local", created_by="worker", created_from_agent_id="worker"
    )
    store.append_run_message(lease, thread_row(Message(role=Role.USER, content=text), 0, None, 0))
    store.close_run(lease)
