"""The thread API's rules in-process: a store seen as one caller (``store.for_caller``).

Two organizations, three people: ann (admin of acme), bob (acme) and eve (globex). Every
operation is tried by someone who may not do it, and the store is checked unchanged after.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from roboz.threads import (
    AgentMessage,
    AgentRole,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
    Caller,
    MessageNotFoundError,
    SQLiteThreadStore,
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadOrigin,
    ThreadPermissionError,
    ThreadRating,
    ThreadReadOnlyError,
    ThreadVisibility,
    api_view,
)
from roboz.threads._schema import SCHEMA_VERSION
from roboz.threads.record import AgentMessageStatus

ANN = Caller("ann", "acme", admin=True)
BOB = Caller("bob", "acme")
CAT = Caller("cat", "acme")
EVE = Caller("eve", "globex")


def _ids(page: Any) -> list[str]:
    return [t.thread_id for t in page.threads]


def test_private_threads_are_their_creators_and_admins_org_threads_the_orgs(store: Any) -> None:
    private = store.for_caller(BOB).create_thread(title="bob's own")
    shared = store.for_caller(BOB).create_thread(title="team", visibility=ThreadVisibility.ORG)
    assert private.origin is ThreadOrigin.API and private.created_by_principal == "user:bob"

    assert store.for_caller(BOB).get_thread(private.thread_id).title == "bob's own"
    assert store.for_caller(ANN).get_thread(private.thread_id).title == "bob's own"
    assert store.for_caller(CAT).get_thread(shared.thread_id).title == "team"
    with pytest.raises(ThreadNotFoundError) as hidden:
        store.for_caller(CAT).get_thread(private.thread_id)
    with pytest.raises(ThreadNotFoundError) as missing:
        store.for_caller(CAT).get_thread("th_nothing_here")
    assert str(hidden.value) == f"no thread {private.thread_id!r}"
    assert str(missing.value) == "no thread 'th_nothing_here'"
    for thread in (private, shared):  # another org: as if it did not exist, even for an ORG one
        with pytest.raises(ThreadNotFoundError, match="^no thread"):
            store.for_caller(EVE).get_thread(thread.thread_id)
        with pytest.raises(ThreadNotFoundError):
            store.for_caller(EVE).delta_since(thread.thread_id, None)

    assert _ids(store.for_caller(BOB).list_threads()) == [shared.thread_id, private.thread_id]
    assert _ids(store.for_caller(ANN).list_threads()) == [shared.thread_id, private.thread_id]
    assert _ids(store.for_caller(CAT).list_threads()) == [shared.thread_id]
    assert _ids(store.for_caller(EVE).list_threads()) == []
    eve_admin = Caller("eve", "globex", admin=True)
    assert _ids(store.for_caller(eve_admin).list_threads()) == []


def test_only_the_creator_or_an_admin_changes_a_thread_others_may_fork_pin_and_rate(
    store: Any,
) -> None:
    shared = store.for_caller(BOB).create_thread(
        visibility=ThreadVisibility.ORG, messages=[AgentMessage.text("hello")]
    )
    tid = shared.thread_id
    cat = store.for_caller(CAT)
    with pytest.raises(ThreadPermissionError, match="only its creator"):
        cat.delete_thread(tid)
    with pytest.raises(ThreadPermissionError):
        cat.set_title(tid, "mine now")
    with pytest.raises(ThreadPermissionError):
        cat.writable(tid)
    assert store.get_thread(tid).title is None

    fork = cat.fork_thread(tid, 0)
    assert fork.created_by == "cat" and fork.visibility is ThreadVisibility.PRIVATE
    assert fork.forked_from_thread_id == tid
    assert cat.set_pinned(tid, True) is not None
    cat.rate_thread(tid, ThreadRating.POSITIVE, sequence_num=0, comment="nice")
    assert store.ratings(tid) == [("cat", 0, "positive", "nice")]

    store.for_caller(ANN).set_title(tid, "renamed by the admin")
    assert store.get_thread(tid).title == "renamed by the admin"
    store.for_caller(ANN).delete_thread(tid)
    with pytest.raises(ThreadNotFoundError):
        store.get_thread(tid)
    assert store.ratings(tid) == []  # deleted with the thread


def test_pins_are_personal_and_reported_by_list_and_search_only(store: Any) -> None:
    thread = store.for_caller(BOB).create_thread(
        title="Quarterly numbers", visibility=ThreadVisibility.ORG
    )
    other = store.for_caller(BOB).create_thread(title="lunch", visibility=ThreadVisibility.ORG)
    tid = thread.thread_id
    first = store.for_caller(BOB).set_pinned(tid, True)
    assert store.for_caller(BOB).set_pinned(tid, True) == first  # pinning again keeps the time
    listed = {t.thread_id: t.pinned_at for t in store.for_caller(BOB).list_threads().threads}
    assert listed == {tid: first, other.thread_id: None}
    assert {t.thread_id: t.pinned_at for t in store.for_caller(CAT).list_threads().threads} == {
        tid: None,
        other.thread_id: None,
    }
    assert store.for_caller(BOB).get_thread(tid).pinned_at is None  # single reads: None
    found = store.for_caller(BOB).search_threads("quarterly")
    assert [(t.thread_id, t.pinned_at) for t in found.threads] == [(tid, first)]
    assert _ids(store.for_caller(BOB).list_threads(pinned_only=True)) == [tid]
    assert store.for_caller(BOB).set_pinned(tid, False) is None
    assert _ids(store.for_caller(BOB).list_threads(pinned_only=True)) == []
    with pytest.raises(ThreadNotFoundError):
        store.for_caller(EVE).set_pinned(tid, True)


def test_search_finds_title_and_message_text_pages_through_and_keeps_to_what_is_visible(
    store: Any,
) -> None:
    bob = store.for_caller(BOB)
    made = []
    for n in range(5):
        text = f'the "{n}" report: 100% done_{n}' if n % 2 == 0 else f"lunch {n}"
        made.append(
            bob.create_thread(
                title=f"t{n}",
                visibility=ThreadVisibility.ORG,
                messages=[AgentMessage.text(text)],
            ).thread_id
        )
    secret = bob.create_thread(title="REPORT secret", messages=[AgentMessage.text("x")])
    evens = [made[4], made[2], made[0]]
    assert _ids(bob.search_threads("Report")) == [secret.thread_id, *evens]
    assert _ids(store.for_caller(CAT).search_threads("report")) == evens
    assert _ids(store.for_caller(CAT).search_threads('"2" report')) == [made[2]]
    assert _ids(store.for_caller(CAT).search_threads("100%")) == evens
    assert _ids(store.for_caller(CAT).search_threads("e_")) == evens  # _ is no wildcard
    assert _ids(store.for_caller(CAT).search_threads("0% d")) == evens
    assert _ids(store.for_caller(CAT).search_threads("%")) == evens
    assert _ids(store.for_caller(EVE).search_threads("report")) == []

    first = store.for_caller(CAT).search_threads("report", limit=2)
    assert _ids(first) == evens[:2] and first.next_page_token is not None
    rest = store.for_caller(CAT).search_threads("report", limit=2, page_token=first.next_page_token)
    assert _ids(rest) == evens[2:] and rest.next_page_token is None
    everything, token = [], None
    while True:
        page = bob.list_threads(limit=2, page_token=token)
        everything += _ids(page)
        token = page.next_page_token
        if token is None:
            break
    assert everything == [secret.thread_id, *reversed(made)]
    for bad in ("nope", "pg1.!!!", "pg1.WzFd"):
        with pytest.raises(ValueError, match="page token"):
            bob.list_threads(page_token=bad)
    with pytest.raises(ValueError, match="empty"):
        bob.search_threads("  ")


def test_read_only_threads_refuse_turns_but_stay_open_to_reading_rating_and_forking(
    store: Any,
) -> None:
    external = store.create_thread(
        org_id="acme",
        created_by="bob",
        origin=ThreadOrigin.EXTERNAL,
        messages=[AgentMessage.text("imported")],
    )
    bob = store.for_caller(BOB)
    with pytest.raises(ThreadReadOnlyError, match="refuses new messages"):
        bob.writable(external.thread_id)
    assert bob.get_thread(external.thread_id).is_read_only()
    bob.rate_thread(external.thread_id, ThreadRating.NEGATIVE)
    fork = bob.fork_thread(external.thread_id, 0)
    assert fork.origin is ThreadOrigin.API and bob.writable(fork.thread_id)


def test_ratings_replace_the_callers_earlier_rating_and_name_a_missing_message(store: Any) -> None:
    thread = store.for_caller(BOB).create_thread(messages=[AgentMessage.text("q")])
    bob = store.for_caller(BOB)
    bob.rate_thread(thread.thread_id, ThreadRating.POSITIVE)
    bob.rate_thread(thread.thread_id, ThreadRating.NEGATIVE, comment="changed my mind")
    with pytest.raises(MessageNotFoundError, match="no message 5"):
        bob.rate_thread(thread.thread_id, ThreadRating.POSITIVE, sequence_num=5)
    assert store.ratings(thread.thread_id) == [("bob", None, "negative", "changed my mind")]


def test_a_thread_being_run_is_not_deleted(store: Any) -> None:
    thread = store.for_caller(BOB).create_thread()
    lease, _, _ = store.open_run(
        thread.thread_id, org_id="acme", created_by="bob", created_from_agent_id=None
    )
    with pytest.raises(ThreadBusyError, match="cancel its turn"):
        store.for_caller(BOB).delete_thread(thread.thread_id)
    store.close_run(lease)
    store.for_caller(BOB).delete_thread(thread.thread_id)
    assert store.for_caller(BOB).list_threads().threads == []


def test_api_reads_strip_raw_response_and_synthesize_the_payload_of_legacy_rows(
    store: Any,
) -> None:
    legacy = AgentToolResultContent(
        tool_use_id="tu_1",
        tool_name="lookup",
        runtime_ms=3,
        status="success",
        raw_response={"toolResult": {"content": [{"json": {"items": [1, 2]}}]}},
    )
    current = AgentToolResultContent(
        tool_use_id="tu_2",
        tool_name="lookup",
        runtime_ms=3,
        status="success",
        payload="fine",
        raw_response={"toolResult": {"content": [{"text": "fine"}]}},
    )
    thread = store.create_thread(
        org_id="acme",
        created_by="bob",
        messages=[
            AgentMessage(
                role=AgentRole.ASSISTANT,
                content=[AgentToolUseContent(tool_use_id="tu_1", tool_name="lookup")],
                status=AgentMessageStatus.COMPLETED,
            ),
            AgentMessage(
                role=AgentRole.ROBOTO,
                content=[legacy, current],
                status=AgentMessageStatus.COMPLETED,
            ),
        ],
    )
    bob = store.for_caller(BOB)
    for read in (
        bob.get_thread(thread.thread_id).messages[1],
        bob.delta_since(thread.thread_id, None).messages_by_idx[1],
    ):
        blocks = read.content
        assert [(b.payload, b.raw_response) for b in blocks] == [([1, 2], None), ("fine", None)]  # type: ignore[union-attr]
    # The store itself keeps what was written.
    assert store.get_thread(thread.thread_id).messages[1].content[0].raw_response is not None  # type: ignore[union-attr]
    plain = store.get_thread(thread.thread_id)
    assert api_view(plain) is not plain and plain.status is AgentThreadStatus.USER_TURN


def test_api_tokens_are_stored_hashed_and_revocable(store: Any) -> None:
    token_id, token = store.create_api_token(BOB, label="laptop")
    assert token.startswith(f"rbz_{token_id}_")
    assert store.verify_api_token(token) == BOB
    assert store.verify_api_token(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert store.verify_api_token("Bearer " + token) is None
    assert store.verify_api_token("") is None
    (info,) = store.list_api_tokens()
    assert (info.user_id, info.org_id, info.admin, info.label) == ("bob", "acme", False, "laptop")
    assert store.revoke_api_token(token_id) is True
    assert store.revoke_api_token(token_id) is False
    assert store.verify_api_token(token) is None
    assert store.list_api_tokens()[0].revoked is not None


@pytest.mark.sqlite_only
def test_tokens_secrets_are_not_in_the_database_file(tmp_path: Path) -> None:
    with SQLiteThreadStore(tmp_path / "t.db") as store:
        token_id, token = store.create_api_token(ANN)
    # The secret is URL-safe base64, which may itself hold "_": cut the known prefix.
    secret = token.removeprefix(f"rbz_{token_id}_")
    assert len(secret) >= 32
    assert secret.encode() not in (tmp_path / "t.db").read_bytes()
    wal = tmp_path / "t.db-wal"
    assert not wal.exists() or secret.encode() not in wal.read_bytes()


@pytest.mark.sqlite_only
def test_a_version_3_store_gains_pins_ratings_and_tokens(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SQLiteThreadStore(path) as store:
        thread = store.create_thread(org_id="acme", created_by="bob")
    with sqlite3.connect(path) as raw:
        for table in ("pins", "ratings", "api_tokens"):
            raw.execute(f"DROP TABLE {table}")
        raw.execute("PRAGMA user_version = 3")
    with SQLiteThreadStore(path) as store:
        assert store.for_caller(BOB).set_pinned(thread.thread_id, True) is not None
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_identities_are_checked() -> None:
    for bad in ("", " bob", "bob\n", "a" * 129, "../x"):
        with pytest.raises(ValueError, match="user id"):
            Caller(bad, "acme")
    with pytest.raises(ValueError, match="organization id"):
        Caller("bob", "")
