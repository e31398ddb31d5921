"""A run's appends: on SQLite they write the message row alone (the thread row stays as it
was), so every reader of the thread's revision and message count must read them from its
last row as well. These tests hold every such reader, and every other writer, to that."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from roboz.threads import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadRecord,
    MessageNotFoundError,
    RunLease,
    RunRow,
    SQLiteThreadStore,
)
from roboz.threads.tokens import decode_token, encode_token


def row(text: str) -> RunRow:
    extras = '{"role":"user","content":"' + text + '"}'
    return RunRow(AgentRole.USER, '[["text", "' + text + '"]]', extras)


def revision(record: AgentThreadRecord) -> int:
    return decode_token(record.continuation_token, record.thread_id)


def texts(store: Any, thread_id: str) -> list[str]:
    return [m.content[0].text for m in store.get_thread(thread_id).messages]


def open_run(store: Any, thread_id: str) -> RunLease:
    lease, _, _ = store.open_run(thread_id, org_id="o", created_by="u", created_from_agent_id=None)
    return lease


def test_every_reader_sees_a_runs_appends(store: Any) -> None:
    lease = open_run(store, "th_run")
    before = store.get_thread("th_run")
    seqs = [store.append_run_message(lease, row(f"m{i}")) for i in range(4)]
    assert seqs == [0, 1, 2, 3]
    now = store.get_thread("th_run")
    assert revision(now) == revision(before) + 4
    assert store.thread_state("th_run") == (revision(now), True)
    assert store.thread_metadata("th_run").continuation_token == now.continuation_token
    listed = {t.thread_id: t for t in store.list_threads(org_id="o")}
    assert listed["th_run"].continuation_token == now.continuation_token
    (info,) = store.list_runs(["u"])
    assert info.message_count == 4 and info.active
    delta = store.delta_since("th_run", before.continuation_token)
    assert sorted(delta.messages_by_idx) == [0, 1, 2, 3]
    assert before.apply_delta(delta) == now
    assert store.delta_since("th_run", now.continuation_token).messages_by_idx == {}
    # Bounds that come from the message count see the appended rows.
    store.rate_thread("th_run", "u", "up", sequence_num=3)
    with pytest.raises(MessageNotFoundError):
        store.rate_thread("th_run", "u", "up", sequence_num=4)
    store.close_run(lease)
    assert store.thread_state("th_run") == (revision(now) + 1, False)
    assert texts(store, "th_run") == ["m0", "m1", "m2", "m3"]


def test_other_writers_between_a_runs_appends_keep_order_and_revisions(store: Any) -> None:
    lease = open_run(store, "th_mix")
    store.append_run_message(lease, row("a"))
    store.append_run_message(lease, row("b"))
    seen = store.get_thread("th_mix")
    store.set_title("th_mix", "titled")  # a writer that moves the revision only
    titled = store.get_thread("th_mix")
    assert revision(titled) == revision(seen) + 1
    assert store.append_run_message(lease, row("c")) == 2
    store.append_message("th_mix", AgentMessage.text("from a client"))  # takes number 3
    assert store.append_run_message(lease, row("d")) == 4
    store.regenerate_turn("th_mix", 4)  # the run's last row goes again
    assert store.append_run_message(lease, row("e")) == 4
    store.close_run(lease)
    after = store.get_thread("th_mix")
    assert texts(store, "th_mix") == ["a", "b", "c", "from a client", "e"]
    assert after.title == "titled"
    replayed = seen.apply_delta(store.delta_since("th_mix", seen.continuation_token))
    assert replayed == after
    stepped = titled.apply_delta(store.delta_since("th_mix", titled.continuation_token))
    assert stepped == after


def test_a_streamed_reply_between_appends(store: Any) -> None:
    lease = open_run(store, "th_draft")
    store.append_run_message(lease, row("ask"))
    start = store.get_thread("th_draft")
    draft = store.open_draft(lease)
    assert draft == 1
    store.append_blocks("th_draft", draft, [AgentTextContent(text="thinking")])
    store.finish_draft(lease, draft, RunRow(AgentRole.ASSISTANT, "[]", '{"role":"assistant"}'), [])
    assert store.append_run_message(lease, row("result")) == 2
    store.close_run(lease)
    final = store.get_thread("th_draft")
    assert [m.status for m in final.messages][1] == AgentMessageStatus.COMPLETED
    assert start.apply_delta(store.delta_since("th_draft", start.continuation_token)) == final


def test_random_interleavings_reconstruct_exactly(store: Any) -> None:
    """A run appends while others write and two clients poll at different rates: every
    poll ends equal to the thread, and every revision a client is given is new."""
    rng = random.Random(20261206)
    for round_ in range(3):
        thread_id = f"th_random_{round_}"
        lease = open_run(store, thread_id)
        clients = [store.get_thread(thread_id)] * 2
        revisions = [revision(clients[0])]
        expected: list[str] = []
        for step in range(80):
            op = rng.choice(["run", "run", "run", "client", "title", "regen", "draft"])
            if op == "run":
                store.append_run_message(lease, row(f"r{step}"))
                expected.append(f"r{step}")
            elif op == "client":
                store.append_message(thread_id, AgentMessage.text(f"c{step}"))
                expected.append(f"c{step}")
            elif op == "title":
                store.set_title(thread_id, f"t{step}")
            elif op == "regen" and expected:
                at = rng.randrange(len(expected))
                store.regenerate_turn(thread_id, at)
                del expected[at:]
            elif op == "draft":
                seq = store.open_draft(lease)
                block = AgentTextContent(text=f"d{step}")
                store.append_blocks(thread_id, seq, [block])
                done = RunRow(AgentRole.ASSISTANT, "[]", '{"role":"assistant"}')
                store.finish_draft(lease, seq, done, [])
                expected.append(f"d{step}")
            for i, every in enumerate((1, 5)):
                if step % every == 0:
                    delta = store.delta_since(thread_id, clients[i].continuation_token)
                    clients[i] = clients[i].apply_delta(delta)
                    assert clients[i] == store.get_thread(thread_id)
            now = revision(store.get_thread(thread_id))
            assert now >= revisions[-1]
            if now != revisions[-1]:
                revisions.append(now)
        store.close_run(lease)
        assert texts(store, thread_id) == expected
        assert len(set(revisions)) == len(revisions)
        for client in clients:
            delta = store.delta_since(thread_id, client.continuation_token)
            assert client.apply_delta(delta) == store.get_thread(thread_id)


@pytest.mark.sqlite_only
def test_a_version_4_store_is_migrated_and_loses_nothing(tmp_path: Path) -> None:
    """A file written before runs appended rows alone (the thread row always current, every
    message indexed by revision) opens, keeps every message, its tokens stay valid, and a
    run continues it where it ended."""
    from roboz.threads._schema import _SCHEMA_V1, _V1_TO_V2, _V2_TO_V3, _V3_TO_V4, SCHEMA_VERSION

    path = tmp_path / "v4.db"
    raw = sqlite3.connect(path)
    for script in (_SCHEMA_V1, _V1_TO_V2, _V2_TO_V3, _V3_TO_V4):
        for statement in script.split(";"):
            raw.execute(statement)
    raw.execute(
        "INSERT INTO threads (thread_id, org_id, created_by, created, meta, status, "
        "message_count, revision) VALUES ('th_old', 'o', 'u', '2026-01-01T00:00:00+00:00', "
        "'{}', 'user_turn', 2, 7)"
    )
    for seq, (role, text, rev) in enumerate((("user", "hello", 5), ("assistant", "hi", 6))):
        raw.execute(
            "INSERT INTO messages (thread_id, seq, role, status, created, content, revision, "
            "base_revision) VALUES ('th_old', ?, ?, 'completed', '2026-01-01T00:00:00+00:00', "
            "?, ?, ?)",
            (seq, role, f'[["text", "{text}"]]', rev, rev),
        )
    raw.execute("PRAGMA user_version = 4")
    raw.commit()
    raw.close()
    old_token = encode_token("th_old", 7)
    with SQLiteThreadStore(path) as store:
        thread = store.get_thread("th_old")
        assert thread.continuation_token == old_token
        assert texts(store, "th_old") == ["hello", "hi"]
        assert store.delta_since("th_old", old_token).messages_by_idx == {}
        lease = open_run(store, "th_old")
        assert store.append_run_message(lease, row("again")) == 2
        store.close_run(lease)
        assert texts(store, "th_old") == ["hello", "hi", "again"]
        delta = store.delta_since("th_old", old_token)
        assert sorted(delta.messages_by_idx) == [2]
        assert thread.apply_delta(delta) == store.get_thread("th_old")
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        indexes = raw.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages'"
        )
        assert {name for (name,) in indexes} == {"messages_changed"}
