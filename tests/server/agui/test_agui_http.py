"""``POST /v1/agui`` over plain HTTP: refusals are the thread API's JSON errors with nothing
recorded, a frontend's thread id is scoped to its user, and a cancelled turn ends the run
with a cancelled outcome."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from roboz.threads import AgentThreadStatus, ThreadVisibility
from tests.server.conftest import Served


def _input(thread_id: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": "run-1", "messages": list(messages), **extra}


def _user(text: str) -> dict[str, Any]:
    return {"id": "u-1", "role": "user", "content": text}


def _post(served: Served, who: str | None, body: Any, query: str = "") -> httpx.Response:
    headers = {"Authorization": f"Bearer {served.tokens[who]}"} if who else {}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{served.url}/v1/agui{query}", content=content, headers=headers, timeout=30)


def _events(served: Served, who: str, body: Any) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {served.tokens[who]}"}
    found: list[dict[str, Any]] = []
    url = f"{served.url}/v1/agui"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                found.append(json.loads(line[6:]))
    return found


def _threads(served: Served) -> list[tuple[str, int]]:
    rows = []
    for who in ("ann", "eve"):
        for thread in served.client(who).list_threads(limit=1000).threads:
            full = served.client(who).get_thread(thread.thread_id)
            rows.append((thread.thread_id, len(full.messages)))
    return sorted(rows)


def test_refusals_are_json_errors_and_record_nothing(agui_served: Served) -> None:
    bob = agui_served.client("bob")
    mine = bob.create_thread(visibility=ThreadVisibility.ORG)  # cat reads it, may not write
    before = _threads(agui_served)
    cases = [
        (None, _input("t", _user("hi")), "", 401, "unauthorized"),
        ("bob", b"{not json", "", 400, "malformed_json"),
        ("bob", {"threadId": "t"}, "", 422, "invalid_request"),
        ("bob", _input("t"), "", 422, "invalid_request"),
        (
            "bob",
            _input("t", {"id": "a", "role": "assistant", "content": "x"}),
            "",
            422,
            "invalid_request",
        ),
        ("bob", _input("t", _user("   ")), "", 422, "invalid_request"),
        ("bob", _input("t", _user("hi")), "?agent=nobody", 400, "unknown_agent"),
        (
            "bob",
            _input("t", _user("hi"), forwardedProps={"roboz": {"goals": [{"goal_type": "fly"}]}}),
            "",
            422,
            "invalid_request",
        ),
        (
            "bob",
            _input("t", _user("hi"), forwardedProps={"roboz": {"nope": 1}}),
            "",
            422,
            "invalid_request",
        ),
        ("bob", _input("x" * 201, _user("hi")), "", 422, "invalid_request"),
        ("cat", _input(mine.thread_id, _user("hi")), "", 403, "forbidden"),
    ]
    for who, body, query, status, code in cases:
        response = _post(agui_served, who, body, query)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code), body
    assert _threads(agui_served) == before


def test_a_frontend_thread_id_names_a_thread_of_its_user_only(agui_served: Served) -> None:
    bob, eve = agui_served.client("bob"), agui_served.client("eve")
    bobs = bob.create_thread(visibility=ThreadVisibility.ORG)
    # eve sends bob's thread id: another org's thread reads as missing, so it names a new
    # thread of eve's; bob's is untouched.
    events = _events(agui_served, "eve", _input(bobs.thread_id, _user("hello 2")))
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    assert bob.get_thread(bobs.thread_id).messages == []
    (eves,) = eve.list_threads().threads
    assert eves.thread_id != bobs.thread_id and eves.created_by == "eve"
    # The same frontend id from bob and from eve: two threads.
    _events(agui_served, "bob", _input("shared-frontend-id", _user("hello 2")))
    _events(agui_served, "eve", _input("shared-frontend-id", _user("hello 2")))
    assert len(eve.list_threads().threads) == 2
    assert len(bob.list_threads().threads) == 2
    # And again from bob: the same thread continues.
    _events(agui_served, "bob", _input("shared-frontend-id", _user("again 2")))
    assert len(bob.list_threads().threads) == 2


def test_a_cancelled_turn_finishes_the_run_as_cancelled(agui_served: Served) -> None:
    bob = agui_served.client("bob")
    thread = bob.create_thread(agent="slow")
    found: list[dict[str, Any]] = []

    def cancel_once_streaming() -> None:
        while not any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in list(found)):
            threading.Event().wait(0.02)
        bob.cancel(thread.thread_id)

    canceller = threading.Thread(target=cancel_once_streaming)
    canceller.start()
    headers = {"Authorization": f"Bearer {agui_served.tokens['bob']}"}
    body = _input(thread.thread_id, _user("a long answer please 200"))
    with httpx.stream(
        "POST", f"{agui_served.url}/v1/agui", json=body, headers=headers, timeout=30
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                found.append(json.loads(line[6:]))
    canceller.join(10)
    last = found[-1]
    assert last["type"] == "RUN_FINISHED" and last["outcome"] == {"type": "cancelled"}
    assert bob.get_thread(thread.thread_id).status is AgentThreadStatus.USER_TURN
