"""The SQLite store: persistence, forks, read-only threads, bad input, concurrent writers."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from roboz.threads import (
    AgentErrorContent,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTask,
    AgentTextContent,
    AgentThreadStatus,
    AgentToolUseContent,
    CorruptRecordError,
    MessageFinalizedError,
    MessageGeneratingError,
    MessageNotFoundError,
    SchemaVersionError,
    SQLiteThreadStore,
    ThreadNotFoundError,
    ThreadOrigin,
    ThreadReadOnlyError,
    ThreadVisibility,
    UnmappedContentTypeError,
)
from roboz.threads._schema import SCHEMA_VERSION


def generating(text: str = "") -> AgentMessage:
    blocks = [AgentTextContent(text=text)] if text else []
    return AgentMessage(
        role=AgentRole.ASSISTANT, content=blocks, status=AgentMessageStatus.GENERATING
    )


def test_thread_survives_reopening_the_file(db_path: Path) -> None:
    first = SQLiteThreadStore(db_path)
    thread = first.create_thread(
        org_id="org",
        created_by="jo",
        title="Plan",
        model_profile="advanced",
        created_by_principal="user:jo@example.com",
        visibility=ThreadVisibility.ORG,
    )
    first.append_message(thread.thread_id, AgentMessage.text("ü question"))
    first.append_message(
        thread.thread_id,
        AgentMessage(
            role=AgentRole.ASSISTANT,
            content=[
                AgentTextContent(text="calling"),
                AgentToolUseContent(tool_use_id="t1", tool_name="s", input={"k": [1]}),
            ],
            status=AgentMessageStatus.COMPLETED,
        ),
    )
    before = first.get_thread(thread.thread_id)
    first.close()

    second = SQLiteThreadStore(db_path)
    try:
        after = second.get_thread(thread.thread_id)
        assert after == before
        assert after.title == "Plan" and after.visibility is ThreadVisibility.ORG
        assert after.created_by_principal == "user:jo@example.com"
        assert [m.content for m in after.messages] == [m.content for m in before.messages]
        with sqlite3.connect(db_path) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        second.close()


def test_unknown_thread_and_message_are_clear_errors(store: SQLiteThreadStore) -> None:
    with pytest.raises(ThreadNotFoundError, match="nope"):
        store.get_thread("nope")
    with pytest.raises(ThreadNotFoundError):
        store.append_message("nope", AgentMessage.text("x"))
    thread = store.create_thread(org_id="o", created_by="u")
    with pytest.raises(MessageNotFoundError):
        store.update_message(thread.thread_id, 0, generating())
    with pytest.raises(ValueError, match="already exists"):
        store.create_thread(org_id="o", created_by="u", thread_id=thread.thread_id)


def test_update_in_place_only_while_generating(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    seq = store.append_message(thread_id, generating())
    store.update_message(thread_id, seq, generating("par"))
    store.update_message(thread_id, seq, generating("partial"))
    # Growth is kept as appended blocks: what clients that saw "par" hold.
    grown = [AgentTextContent(text="par"), AgentTextContent(text="tial")]
    assert store.get_thread(thread_id).messages[seq].content == grown
    done = AgentMessage.text("partial answer", role=AgentRole.ASSISTANT)
    store.update_message(thread_id, seq, done)
    with pytest.raises(MessageFinalizedError, match="completed"):
        store.update_message(thread_id, seq, generating("rewrite"))
    assert store.get_thread(thread_id).messages[seq].content == done.content


def test_role_of_a_message_cannot_change(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    seq = store.append_message(thread_id, generating())
    user = AgentMessage(role=AgentRole.USER, content=[], status=AgentMessageStatus.GENERATING)
    with pytest.raises(ValueError, match="role"):
        store.update_message(thread_id, seq, user)


def test_verbatim_thread_refuses_compression_blocks(store: SQLiteThreadStore) -> None:
    from roboz.threads import AgentDeletedContent, CompressionError

    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    tombstoned = AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[AgentDeletedContent()],
        status=AgentMessageStatus.COMPLETED,
    )
    with pytest.raises(CompressionError, match="DELETED-tier"):
        store.append_message(thread_id, tombstoned)
    assert store.get_thread(thread_id).messages == []


def test_fork_copies_up_to_a_message_and_drops_origin_fields(store: SQLiteThreadStore) -> None:
    source = store.create_thread(
        org_id="org",
        created_by="jo",
        title="Source",
        origin=ThreadOrigin.EXTERNAL,
        created_from_agent_id="ag_1",
        created_from_trigger_id="tr_1",
        model_profile="standard",
        visibility=ThreadVisibility.ORG,
    )
    store.set_tasks(source.thread_id, [AgentTask(task_id=1, position=0, title="x")])
    for i in range(4):
        store.append_message(source.thread_id, AgentMessage.text(f"m{i}"), allow_read_only=True)
    fork = store.fork_thread(source.thread_id, 1, created_by="kim")
    assert [m.content for m in fork.messages] == [
        [AgentTextContent(text="m0")],
        [AgentTextContent(text="m1")],
    ]
    assert fork.thread_id != source.thread_id and fork.created_by == "kim"
    assert fork.forked_from_thread_id == source.thread_id
    assert fork.forked_from_message_sequence_num == 1
    assert fork.origin is ThreadOrigin.API and not fork.is_read_only()
    assert fork.created_from_agent_id is None and fork.created_from_trigger_id is None
    assert fork.org_id == "org" and fork.title == "Source" and fork.model_profile == "standard"
    assert fork.visibility is ThreadVisibility.PRIVATE  # the forker's own thread
    assert fork.tasks == [] and fork.status is AgentThreadStatus.USER_TURN
    assert store.get_thread(source.thread_id).visibility is ThreadVisibility.ORG
    store.append_message(fork.thread_id, AgentMessage.text("continue here"))
    assert len(store.get_thread(source.thread_id).messages) == 4  # the source is unaffected
    with pytest.raises(MessageNotFoundError):
        store.fork_thread(source.thread_id, 4, created_by="kim")


def test_fork_through_an_unfinished_message_is_refused(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    store.append_message(thread_id, generating("draft"))
    with pytest.raises(MessageGeneratingError, match="still being generated"):
        store.fork_thread(thread_id, 0, created_by="u")


def test_externally_owned_thread_refuses_new_messages(store: SQLiteThreadStore) -> None:
    thread = store.create_thread(org_id="o", created_by="u", origin=ThreadOrigin.EXTERNAL)
    assert thread.is_read_only()
    with pytest.raises(ThreadReadOnlyError, match="refuses new messages"):
        store.append_message(thread.thread_id, AgentMessage.text("hi"))
    assert store.get_thread(thread.thread_id).messages == []
    store.set_status(thread.thread_id, AgentThreadStatus.USER_TURN)  # other writes stay open


def test_list_threads_filters_and_carries_metadata_only(store: SQLiteThreadStore) -> None:
    a = store.create_thread(org_id="o1", created_by="jo", title="a")
    store.append_message(a.thread_id, AgentMessage.text("x"))
    store.create_thread(org_id="o1", created_by="kim")
    store.create_thread(org_id="o2", created_by="jo")
    assert {t.created_by for t in store.list_threads(org_id="o1")} == {"jo", "kim"}
    mine = store.list_threads(org_id="o1", created_by="jo")
    assert [t.thread_id for t in mine] == [a.thread_id]
    assert mine[0].messages == [] and mine[0].tasks is None and mine[0].goals is None
    assert len(store.list_threads()) == 3 and len(store.list_threads(limit=2)) == 2


def test_unencodable_block_fails_before_writing(store: SQLiteThreadStore) -> None:
    from pydantic import BaseModel

    class Stray(BaseModel):
        content_type: str = "stray"

    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    message = AgentMessage.model_construct(
        role=AgentRole.USER, content=[Stray()], status=AgentMessageStatus.COMPLETED
    )
    with pytest.raises(UnmappedContentTypeError, match="stray"):
        store.append_message(thread_id, message)
    assert store.get_thread(thread_id).messages == []


@pytest.mark.sqlite_only
def test_corrupt_row_is_reported_and_left_in_place(store: SQLiteThreadStore, db_path: Path) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    store.append_message(thread_id, AgentMessage.text("fine"))
    store.append_message(thread_id, AgentMessage.text("to be broken"))
    broken = '[["mystery", "{}"]]'
    with sqlite3.connect(db_path) as raw:
        raw.execute("UPDATE messages SET content = ? WHERE seq = 1", (broken,))
    with pytest.raises(CorruptRecordError, match=r"message 1 of thread .*mystery"):
        store.get_thread(thread_id)
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT content FROM messages WHERE seq = 1").fetchone()[0] == broken
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 2


def test_newer_or_foreign_schema_is_refused(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SchemaVersionError, match=f"version {SCHEMA_VERSION + 1}"):
        SQLiteThreadStore(newer)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE unrelated (x)")
    with pytest.raises(SchemaVersionError, match="no RoboZ thread schema"):
        SQLiteThreadStore(foreign)
    with sqlite3.connect(foreign) as raw:
        assert raw.execute("SELECT count(*) FROM unrelated").fetchone()[0] == 0


def test_memory_path_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        SQLiteThreadStore(":memory:")


def test_concurrent_writers_lose_no_messages(db_path: Path) -> None:
    setup = SQLiteThreadStore(db_path)
    thread_id = setup.create_thread(org_id="o", created_by="u").thread_id
    setup.close()
    per_writer = 150
    stores = [SQLiteThreadStore(db_path) for _ in range(2)]  # two stores, as two processes would
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def write(store: SQLiteThreadStore, name: str) -> None:
        try:
            barrier.wait()
            for i in range(per_writer):
                store.append_message(thread_id, AgentMessage.text(f"{name}-{i}"))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    workers = [threading.Thread(target=write, args=(stores[i % 2], f"w{i}")) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    messages = stores[0].get_thread(thread_id).messages
    texts = [m.content[0].text for m in messages]  # type: ignore[union-attr]
    assert len(texts) == 4 * per_writer
    assert set(texts) == {f"w{w}-{i}" for w in range(4) for i in range(per_writer)}
    for w in range(4):  # each writer's messages keep their own order
        mine = [t for t in texts if t.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(per_writer)]
    for opened in stores:
        opened.close()


def test_error_content_round_trips_through_the_store(store: SQLiteThreadStore) -> None:
    thread_id = store.create_thread(org_id="o", created_by="u").thread_id
    failed = AgentMessage(
        role=AgentRole.ASSISTANT,
        content=[AgentErrorContent(error_message="cancelled by user", error_code="CANCELLED")],
        status=AgentMessageStatus.CANCELLED,
    )
    store.append_message(thread_id, failed)
    stored = store.get_thread(thread_id).messages[0]
    assert stored.content == failed.content and stored.is_unsuccessful()
