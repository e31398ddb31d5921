"""The thread API over real HTTP: every operation through the client, every refusal a JSON
4xx naming the problem with nothing recorded."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from roboz.server import ThreadApiError, ThreadClient
from roboz.threads import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
    ClientToolSpec,
    ThreadOrigin,
    ThreadRating,
    ThreadVisibility,
)
from tests.server.conftest import Served

PICK = ClientToolSpec(
    name="pick_files",
    description="Ask the user to pick files in their browser.",
    input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
)


def _run_turn(client: ThreadClient, thread_id: str, text: str, **extra: Any) -> Any:
    before = client.get_thread(thread_id)
    client.send_message(thread_id, text, **extra)
    *_, last = client.stream_deltas(thread_id, record=before)
    return last


def _snapshot(served: Served) -> list[tuple[str, int, str]]:
    """Every thread with its message count and status: what "nothing recorded" compares."""
    rows: list[tuple[str, int, str]] = []
    for caller in ("ann", "eve"):
        for thread in (
            served.store.for_caller(served.store.verify_api_token(served.tokens[caller]))
            .list_threads(limit=1000)
            .threads
        ):
            full = served.store.get_thread(thread.thread_id)
            rows.append((thread.thread_id, len(full.messages), full.status.value))
    return sorted(rows)


def test_a_turn_runs_and_reads_back_as_the_stream_built_it(served: Served) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(title="first")
    assert thread.origin is ThreadOrigin.API and thread.created_by == "bob"
    assert thread.status is AgentThreadStatus.NOT_STARTED
    built = _run_turn(bob, thread.thread_id, "hello 30")
    stored = bob.get_thread(thread.thread_id)
    assert built.model_dump() == stored.model_dump()
    assert stored.status is AgentThreadStatus.USER_TURN
    assert stored.messages[0].content[0].text == "hello 30"  # type: ignore[union-attr]
    use = stored.messages[1].content[-1]
    assert isinstance(use, AgentToolUseContent) and use.tool_name == "stop"
    # The reply streamed: its prose arrived as many blocks.
    assert len(stored.messages[1].content) > 10


def test_list_search_pin_rate_fork_delete_over_http(served: Served) -> None:
    bob, cat = served.client("bob"), served.client("cat")
    shared = bob.create_thread(title="Team notes", visibility=ThreadVisibility.ORG)
    mine = bob.create_thread(title="private notes")
    _run_turn(bob, shared.thread_id, "the quarterly numbers 3")
    assert [t.thread_id for t in bob.list_threads().threads] == [mine.thread_id, shared.thread_id]
    assert [t.thread_id for t in cat.list_threads().threads] == [shared.thread_id]
    assert [t.thread_id for t in cat.search_threads("QUARTERLY").threads] == [shared.thread_id]
    assert cat.search_threads("private").threads == []
    first = bob.list_threads(limit=1)
    assert first.next_page_token is not None
    assert [t.thread_id for t in bob.list_threads(page_token=first.next_page_token).threads] == [
        shared.thread_id
    ]

    pinned = cat.set_pinned(shared.thread_id, True)
    assert pinned is not None
    assert [(t.thread_id, t.pinned_at) for t in cat.list_threads(pinned=True).threads] == [
        (shared.thread_id, pinned)
    ]
    assert {t.thread_id: t.pinned_at for t in bob.list_threads().threads}[shared.thread_id] is None
    assert cat.get_thread(shared.thread_id).pinned_at is None
    assert cat.set_pinned(shared.thread_id, False) is None

    cat.rate_thread(shared.thread_id, ThreadRating.POSITIVE, message_sequence_num=1)
    assert served.store.ratings(shared.thread_id) == [("cat", 1, "positive", None)]

    fork = cat.fork_thread(shared.thread_id, 0, title="cat's copy")
    assert (fork.created_by, fork.forked_from_thread_id) == ("cat", shared.thread_id)
    assert len(fork.messages) == 1
    with pytest.raises(ThreadApiError) as refused:
        cat.delete_thread(shared.thread_id)
    assert (refused.value.status, refused.value.code) == (403, "forbidden")
    bob.delete_thread(shared.thread_id)
    with pytest.raises(ThreadApiError) as gone:
        bob.get_thread(shared.thread_id)
    assert (gone.value.status, gone.value.code) == (404, "thread_not_found")


def test_client_tools_scope_context_and_goals_over_http(served: Served) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(agent="picker")
    waiting = _run_turn(
        bob,
        thread.thread_id,
        "please pick my csv files",
        client_tools=[PICK],
        scope={"start_time": 1, "end_time": 2},
        viewing_context={"dataset_ids": ["ds_1"]},
        goals=[],
    )
    assert waiting.status is AgentThreadStatus.CLIENT_TOOL_TURN
    use = waiting.messages[-1].content[-1]
    assert isinstance(use, AgentToolUseContent) and use.tool_name == "pick_files"
    context = waiting.messages[0].content[-1]
    assert context.context.dataset_ids == ["ds_1"]  # type: ignore[union-attr]

    with pytest.raises(ThreadApiError) as busy:
        bob.send_message(thread.thread_id, "hello?", client_tools=[PICK])
    assert (busy.value.status, busy.value.code) == (409, "client_tool_turn")
    with pytest.raises(ThreadApiError) as unknown:
        bob.submit_tool_results(thread.thread_id, {"tu_999": ["a.csv"]})
    assert unknown.value.status == 400 and "tu_999" in unknown.value.message
    assert bob.get_thread(thread.thread_id).model_dump() == waiting.model_dump()

    before = bob.get_thread(thread.thread_id)
    bob.submit_tool_results(thread.thread_id, {use.tool_use_id: ["a.csv", "b.csv"]})
    *_, done = bob.stream_deltas(thread.thread_id, record=before)
    assert done.status is AgentThreadStatus.USER_TURN
    results = [b for m in done.messages for b in m.content if isinstance(b, AgentToolResultContent)]
    assert results[0].payload == ["a.csv", "b.csv"] and results[-1].tool_name == "stop"
    assert done.model_dump() == bob.get_thread(thread.thread_id).model_dump()


def test_an_agent_chained_to_a_client_tool_answers_turns_that_do_not_offer_it(
    served: Served,
) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(agent="picker")  # count_files is chained to pick_files
    done = _run_turn(bob, thread.thread_id, "just say hello")
    assert done.status is AgentThreadStatus.USER_TURN
    assert not any(m.is_unsuccessful() for m in done.messages)
    before = bob.get_thread(thread.thread_id)
    stop = {"name": "stop", "description": "the client's own", "input_schema": {}}
    with pytest.raises(ThreadApiError) as clash:
        bob.send_message(thread.thread_id, "hi", client_tools=[stop])
    assert (clash.value.status, clash.value.code) == (400, "invalid_request")
    assert "'stop'" in clash.value.message
    assert bob.get_thread(thread.thread_id).model_dump() == before.model_dump()


def test_goals_are_declared_and_unknown_goal_types_refused(served: Served) -> None:
    bob = served.client("bob")
    thread = bob.create_thread()
    with pytest.raises(ThreadApiError) as refused:
        bob.send_message(thread.thread_id, "hi", goals=[{"goal_type": "fly"}])
    assert refused.value.status == 422 and "fly" in refused.value.message
    assert bob.get_thread(thread.thread_id).messages == []
    done = _run_turn(bob, thread.thread_id, "hi 2", goals=[{"goal_type": "say_ok"}])
    assert [g.goal_type for g in done.goals or []] == ["say_ok"]
    assert (done.goals or [])[0].status.value == "achieved"


def test_read_only_threads_refuse_turns_with_409_but_read_rate_and_fork(served: Served) -> None:
    external = served.store.create_thread(
        org_id="acme",
        created_by="bob",
        origin=ThreadOrigin.EXTERNAL,
        messages=[AgentMessage.text("from elsewhere")],
    )
    bob = served.client("bob")
    with pytest.raises(ThreadApiError) as refused:
        bob.send_message(external.thread_id, "hello")
    assert (refused.value.status, refused.value.code) == (409, "thread_read_only")
    assert "refuses new messages" in refused.value.message
    assert len(bob.get_thread(external.thread_id).messages) == 1
    bob.rate_thread(external.thread_id, ThreadRating.NEGATIVE)
    assert bob.fork_thread(external.thread_id, 0).origin is ThreadOrigin.API


def test_a_busy_thread_refuses_a_second_turn_and_cancel_records_the_end(served: Served) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(agent="slow")
    before = bob.get_thread(thread.thread_id)
    bob.send_message(thread.thread_id, "a long answer 200")
    with pytest.raises(ThreadApiError) as busy:
        bob.send_message(thread.thread_id, "and another")
    assert (busy.value.status, busy.value.code) == (409, "thread_busy")
    with pytest.raises(ThreadApiError) as not_yours:
        served.client("ann").get_thread(thread.thread_id)  # admin reads
        served.client("cat").cancel(thread.thread_id)
    assert not_yours.value.status == 404  # private: cat does not see it
    stream = bob.stream_deltas(thread.thread_id, record=before)
    next(stream)
    assert bob.cancel(thread.thread_id) is True
    *_, last = stream
    assert last.status is AgentThreadStatus.USER_TURN
    assert [m.content[0].text for m in last.messages if m.role.value == "user"] == [  # type: ignore[union-attr]
        "a long answer 200"
    ]
    # The seed's CANCELLED on the reply it cut off and on the notice after it.
    draft, notice = last.messages[-2:]
    assert (draft.role, draft.status) == (AgentRole.ASSISTANT, AgentMessageStatus.CANCELLED)
    assert notice.status is AgentMessageStatus.CANCELLED and notice.is_unsuccessful()
    assert notice.content[0].model_dump()["error_code"] == "cancelled"
    assert last.model_dump() == bob.get_thread(thread.thread_id).model_dump()
    with pytest.raises(ThreadApiError) as idle:
        bob.cancel(thread.thread_id)
    assert (idle.value.status, idle.value.code) == (409, "no_turn_running")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/ai/threads", b"{not json", 400, "malformed_json"),
        ("POST", "/v1/ai/threads", {"title": 5}, 422, "invalid_request"),
        ("POST", "/v1/ai/threads", {"origin": "external"}, 422, "invalid_request"),
        ("POST", "/v1/ai/threads", {"visibility": "everyone"}, 422, "invalid_request"),
        ("POST", "/v1/ai/threads", {"agent": "nobody"}, 400, "unknown_agent"),
        ("POST", "{thread}/messages", {"text": ""}, 422, "invalid_request"),
        ("POST", "{thread}/messages", {"text": "hi", "extra": 1}, 422, "invalid_request"),
        ("POST", "{thread}/messages", {"txt": "hi"}, 422, "invalid_request"),
        ("POST", "{thread}/messages", [1, 2], 422, "invalid_request"),
        (
            "POST",
            "{thread}/tool-results",
            {"results": {"tu_1": 1}},
            409,
            "not_waiting_for_tool_results",
        ),
        ("POST", "{thread}/fork", {"message_sequence_num": 7}, 404, "message_not_found"),
        ("POST", "{thread}/rate", {"rating": "great"}, 422, "invalid_request"),
        ("GET", "{thread}/delta?continuation_token=ct1.bogus", None, 400, "bad_continuation_token"),
        ("GET", "/v1/ai/threads?page_token=nope", None, 400, "bad_page_token"),
        ("GET", "/v1/ai/threads?limit=0", None, 422, "invalid_request"),
        ("POST", "/v1/ai/threads/search", {"query": "   "}, 422, "invalid_request"),
        ("GET", "/v1/ai/threads/th_missing", None, 404, "thread_not_found"),
        ("DELETE", "/v1/ai/threads/th_missing/pin", None, 404, "thread_not_found"),
        ("GET", "/v1/ai/nothing-here", None, 404, "not_found"),
    ],
)
def test_bad_input_is_a_json_4xx_naming_the_problem_and_records_nothing(
    served: Served, method: str, path: str, body: Any, status: int, code: str
) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(title="target")
    _run_turn(bob, thread.thread_id, "hi 2")
    before = _snapshot(served)
    url = path.replace("{thread}", f"/v1/ai/threads/{thread.thread_id}")
    kwargs: dict[str, Any] = {"headers": {"Authorization": f"Bearer {served.tokens['bob']}"}}
    if isinstance(body, bytes):
        kwargs["content"] = body
        kwargs["headers"]["Content-Type"] = "application/json"
    elif body is not None:
        kwargs["json"] = body
    response = httpx.request(method, served.url + url, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and "\n" not in error["message"]
    assert _snapshot(served) == before


def test_a_10_mb_body_is_refused_with_413_and_nothing_recorded(served: Served) -> None:
    bob = served.client("bob")
    thread = bob.create_thread()
    before = _snapshot(served)
    headers = {"Authorization": f"Bearer {served.tokens['bob']}"}
    big = json.dumps({"text": "x" * (10 * 1024 * 1024)}).encode()
    url = f"{served.url}/v1/ai/threads/{thread.thread_id}/messages"
    response = httpx.post(url, content=big, headers=headers, timeout=60)
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"

    def chunks() -> Any:  # no Content-Length: the limit holds for a chunked body too
        for _ in range(10):
            yield b"x" * (1024 * 1024)

    response = httpx.post(url, content=chunks(), headers=headers, timeout=60)
    assert response.status_code == 413
    assert _snapshot(served) == before


def test_the_openapi_schema_names_every_route(served: Served) -> None:
    schema = httpx.get(served.url + "/openapi.json").json()
    paths = set(schema["paths"])
    for expected in (
        "/v1/ai/threads",
        "/v1/ai/threads/search",
        "/v1/ai/threads/{thread_id}",
        "/v1/ai/threads/{thread_id}/messages",
        "/v1/ai/threads/{thread_id}/tool-results",
        "/v1/ai/threads/{thread_id}/cancel",
        "/v1/ai/threads/{thread_id}/fork",
        "/v1/ai/threads/{thread_id}/pin",
        "/v1/ai/threads/{thread_id}/rate",
        "/v1/ai/threads/{thread_id}/delta",
        "/v1/ai/threads/{thread_id}/stream",
    ):
        assert expected in paths
    assert "AgentThreadRecord" in schema["components"]["schemas"]
    assert "TurnRequest" in schema["components"]["schemas"]
