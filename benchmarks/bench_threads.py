"""Thread store: an incremental delta beside re-reading the thread; appends beside raw sqlite.

Both comparisons run in the same process on the same kind of file, so the ratios hold where
absolute times do not.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from roboz.threads import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentToolUseContent,
    SQLiteThreadStore,
)
from roboz.threads.content import encode_blocks


def _message(i: int) -> AgentMessage:
    if i % 2 == 0:
        return AgentMessage.text(f"user message {i}: " + "words " * 20)
    return AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[
            AgentTextContent(text=f"reply {i} " + "text " * 30),
            AgentToolUseContent(tool_use_id=f"tu_{i}", tool_name="lookup", input={"n": i}),
        ],
        status=AgentMessageStatus.COMPLETED,
    )


def _best_of(func: Callable[[], object], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()
        timings.append(time.perf_counter() - started)
    return min(timings)


def delta_vs_full_read(directory: Path, size: int, repeats: int) -> None:
    store = SQLiteThreadStore(directory / "delta.db")
    thread_id = store.create_thread(org_id="bench", created_by="bench").thread_id
    for i in range(size):
        store.append_message(thread_id, _message(i))
    token = store.get_thread(thread_id).continuation_token
    store.append_message(thread_id, _message(size))

    delta = store.delta_since(thread_id, token)
    assert list(delta.messages_by_idx) == [size]
    delta_s = _best_of(lambda: store.delta_since(thread_id, token), repeats * 10)
    full_s = _best_of(lambda: store.get_thread(thread_id), repeats)
    store.close()
    print(
        f"delta after 1 new message on a {size + 1}-message thread: {delta_s * 1e3:.3f} ms; "
        f"re-reading the whole thread: {full_s * 1e3:.1f} ms; full read / delta = "
        f"{full_s / delta_s:.0f}x"
    )


def _store_appends(path: Path, messages: list[AgentMessage]) -> float:
    store = SQLiteThreadStore(path)
    thread_id = store.create_thread(org_id="bench", created_by="bench").thread_id
    started = time.perf_counter()
    for message in messages:
        store.append_message(thread_id, message)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def _plain_inserts(path: Path, messages: list[AgentMessage]) -> float:
    # The same pragmas and one transaction per row, inserting content that is already
    # serialized, with none of the store's checks, revision or sequence bookkeeping.
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA synchronous = NORMAL")
    raw.execute(
        "CREATE TABLE messages (thread_id TEXT, seq INTEGER, role TEXT, status TEXT, "
        "created TEXT, content TEXT, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID"
    )
    rows = [
        ("t", i, m.role.value, m.status.value, m.created.isoformat(), encode_blocks(m.content))
        for i, m in enumerate(messages)
    ]
    started = time.perf_counter()
    for row in rows:
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?)", row)
        raw.execute("COMMIT")
    elapsed = time.perf_counter() - started
    raw.close()
    return elapsed


def append_vs_plain_insert(directory: Path, count: int, repeats: int) -> None:
    messages = [_message(i) for i in range(count)]
    store_runs, plain_runs = [], []
    for run in range(repeats):  # interleaved, best of each, to damp a noisy machine
        store_runs.append(_store_appends(directory / f"append{run}.db", messages))
        plain_runs.append(_plain_inserts(directory / f"plain{run}.db", messages))
    store_s, plain_s = min(store_runs), min(plain_runs)
    print(
        f"append {count} messages (one transaction each, best of {repeats}): store "
        f"{count / store_s:,.0f} msg/s, plain sqlite insert loop {count / plain_s:,.0f} msg/s; "
        f"store costs {store_s / plain_s:.1f}x the plain loop"
    )


def main(quick: bool = False) -> None:
    size = 2_000 if quick else 10_000
    repeats = 2 if quick else 3
    with tempfile.TemporaryDirectory(prefix="roboz-bench-threads-") as name:
        directory = Path(name)
        delta_vs_full_read(directory, size, repeats)
        append_vs_plain_insert(directory, 1_000 if quick else 5_000, repeats)


if __name__ == "__main__":
    main()
