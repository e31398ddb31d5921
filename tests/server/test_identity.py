"""Identity and visibility over HTTP: every endpoint tried with no token, a malformed one, a
revoked one, another organization's caller and the wrong user of the same organization.
Each refusal is checked to leave the store as it was."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.server.conftest import Served

ENDPOINTS: list[tuple[str, str, Any, bool]] = [
    # method, path under the thread, body, changes the thread (creator/admin only)
    ("GET", "", None, False),
    ("GET", "/delta", None, False),
    ("GET", "/stream", None, False),
    ("POST", "/messages", {"text": "hijack"}, True),
    ("POST", "/tool-results", {"results": {"tu_1": "x"}}, True),
    ("POST", "/cancel", None, True),
    ("DELETE", "", None, True),
    ("POST", "/fork", {"message_sequence_num": 0}, False),
    ("PUT", "/pin", None, False),
    ("DELETE", "/pin", None, False),
    ("POST", "/rate", {"rating": "negative"}, False),
]


def _call(served: Served, token: str | None, method: str, path: str, body: Any) -> httpx.Response:
    headers = {} if token is None else {"Authorization": token}
    http = _HTTP.get(served.url)
    if http is None:  # one client per server: making one costs more than a request
        http = _HTTP[served.url] = httpx.Client(base_url=served.url, timeout=10)
    if path.endswith("/stream"):
        with http.stream(method, path, headers=headers) as response:
            response.read() if response.is_error else None
            return response
    return http.request(method, path, json=body, headers=headers)


_HTTP: dict[str, httpx.Client] = {}


def _state(served: Served) -> Any:
    store = served.store
    threads = store.list_threads(limit=1000)
    return sorted(
        (
            t.thread_id,
            [m.model_dump() for m in store.get_thread(t.thread_id).messages],
            t.status.value,
            store.ratings(t.thread_id),
            sorted(store.pinned_at(u, [t.thread_id]).keys() for u in ("bob", "cat", "eve")),
        )
        for t in threads
    )


@pytest.fixture
def two_threads(served: Served) -> dict[str, str]:
    bob = served.client("bob")
    private = bob.create_thread(title="bob private")
    shared = bob.create_thread(title="bob org", visibility="org")  # type: ignore[arg-type]
    for thread in (private, shared):
        before = bob.get_thread(thread.thread_id)
        bob.send_message(thread.thread_id, "hello 2")
        list(bob.stream_deltas(thread.thread_id, record=before))
    return {"private": private.thread_id, "org": shared.thread_id}


def test_no_token_a_malformed_or_revoked_one_is_401(
    served: Served, two_threads: dict[str, str]
) -> None:
    revoked_id, revoked = served.store.create_api_token(
        served.store.verify_api_token(served.tokens["bob"])
    )
    assert served.store.revoke_api_token(revoked_id)
    before = _state(served)
    for token in (
        None,
        "",
        "Bearer",
        f"Basic {served.tokens['bob']}",
        "Bearer rbz_nope",
        f"Bearer {revoked}",
        f"Bearer {served.tokens['bob']}x",
    ):
        for method, path, body, _ in [*ENDPOINTS, ("GET", "/../../threads", None, False)]:
            response = _call(
                served, token, method, f"/v1/ai/threads/{two_threads['org']}{path}", body
            )
            assert response.status_code == 401, (token, method, path, response.text)
            assert response.json()["error"]["code"] == "unauthorized"
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
        for method, path, body in (
            ("GET", "/v1/ai/threads", None),
            ("POST", "/v1/ai/threads", {"title": "x"}),
            ("POST", "/v1/ai/threads/search", {"query": "bob"}),
            ("GET", "/v1/ai/agents", None),
        ):
            assert _call(served, token, method, path, body).status_code == 401
    assert _state(served) == before


def test_another_orgs_threads_are_404_on_every_endpoint_like_missing_ones(
    served: Served, two_threads: dict[str, str]
) -> None:
    before = _state(served)
    eve = f"Bearer {served.tokens['eve']}"
    for kind in ("private", "org"):
        for method, path, body, _ in ENDPOINTS:
            seen = _call(served, eve, method, f"/v1/ai/threads/{two_threads[kind]}{path}", body)
            missing = _call(served, eve, method, f"/v1/ai/threads/th_none{path}", body)
            assert seen.status_code == missing.status_code == 404, (kind, method, path)
            assert seen.json()["error"]["code"] == missing.json()["error"]["code"]
            assert two_threads[kind] not in str(missing.json())
    assert _call(served, eve, "GET", "/v1/ai/threads", None).json()["threads"] == []
    found = _call(served, eve, "POST", "/v1/ai/threads/search", {"query": "bob"}).json()
    assert found["threads"] == []
    assert _state(served) == before


def test_the_wrong_user_of_the_org_sees_org_threads_only_and_changes_none(
    served: Served, two_threads: dict[str, str]
) -> None:
    cat = f"Bearer {served.tokens['cat']}"
    for method, path, body, changes in ENDPOINTS:
        private = _call(served, cat, method, f"/v1/ai/threads/{two_threads['private']}{path}", body)
        assert private.status_code == 404, (method, path)
        if changes:
            before = _state(served)
            shared = _call(served, cat, method, f"/v1/ai/threads/{two_threads['org']}{path}", body)
            assert shared.status_code == 403, (method, path, shared.text)
            assert shared.json()["error"]["code"] == "forbidden"
            assert _state(served) == before
    listed = _call(served, cat, "GET", "/v1/ai/threads", None).json()["threads"]
    assert [t["thread_id"] for t in listed] == [two_threads["org"]]


def test_an_admin_reads_and_changes_private_threads_of_the_org(
    served: Served, two_threads: dict[str, str]
) -> None:
    ann = served.client("ann")
    assert ann.get_thread(two_threads["private"]).title == "bob private"
    assert {t.thread_id for t in ann.list_threads().threads} == set(two_threads.values())
    ann.delete_thread(two_threads["private"])
    assert [t.thread_id for t in served.client("bob").list_threads().threads] == [
        two_threads["org"]
    ]
