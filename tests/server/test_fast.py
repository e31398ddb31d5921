"""The hot paths: ``GET`` of a thread answered from the response cache, and the SSE writer.

The cache must never serve what the route would not: a changed thread (written by another
connection of the store, another process's way), a revoked token, a caller who may not read
the thread, a deleted thread. The writer must keep each client's events in order and never
let a client whose socket is full hold up the others."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from typing import Any

import httpx
import pytest

from roboz.server import ThreadApiError, create_app
from roboz.server.sse import MAX_BACKLOG, RAW_SEND, Stream, eager
from roboz.threads import Caller, SQLiteThreadStore, ThreadVisibility
from tests.server.agents import make_agent
from tests.server.conftest import Served


def _get(served: Served, who: str, thread_id: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {served.tokens[who]}"}
    return httpx.get(f"{served.url}/v1/ai/threads/{thread_id}", headers=headers, timeout=30)


def test_a_cached_thread_is_served_only_while_unchanged_and_only_to_its_readers(
    served: Served,
) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(title="first", visibility=ThreadVisibility.PRIVATE)
    first = _get(served, "bob", thread.thread_id)
    assert first.status_code == 200
    app: Any = served.server.config.app
    assert app.state.roboz.thread_cache.get(thread.thread_id) is not None  # filled by the route
    assert _get(served, "bob", thread.thread_id).content == first.content  # from the cache
    assert _get(served, "bob", thread.thread_id).content == first.content  # from the cache
    assert _get(served, "ann", thread.thread_id).status_code == 200  # an admin of acme reads
    for who in ("cat", "eve"):  # private to bob; another org: as if missing
        refused = _get(served, who, thread.thread_id)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "thread_not_found"

    # Written through another connection of the store, as another process would.
    with SQLiteThreadStore(served.store.path) as elsewhere:
        elsewhere.set_title(thread.thread_id, "second")
    assert _get(served, "bob", thread.thread_id).json()["title"] == "second"

    token_id = served.tokens["bob"].split("_")[1]
    with SQLiteThreadStore(served.store.path) as elsewhere:
        assert elsewhere.revoke_api_token(token_id)
    revoked = _get(served, "bob", thread.thread_id)
    assert revoked.status_code == 401 and revoked.json()["error"]["code"] == "unauthorized"

    # Checked at the store's present stamp, so answered again without reading a row; a
    # write on the server's own connection (its loop thread) moves no data_version, and the
    # store's count of its own writes must say the thread changed.
    assert _get(served, "ann", thread.thread_id).json()["title"] == "second"
    assert _get(served, "ann", thread.thread_id).json()["title"] == "second"
    served.client("ann").delete_thread(thread.thread_id)
    assert _get(served, "ann", thread.thread_id).status_code == 404
    with pytest.raises(ThreadApiError):
        served.client("ann").get_thread(thread.thread_id)


def test_a_stream_whose_socket_is_full_waits_alone_and_is_ended_when_far_behind() -> None:
    async def main() -> None:
        gate = asyncio.Event()
        got: dict[str, list[bytes]] = {"slow": [], "fast": []}

        def sender(name: str) -> Any:
            async def send(message: Any) -> None:
                if name == "slow":
                    await gate.wait()  # its socket is full until the gate opens
                got[name].append(message["body"] if message["more_body"] else b"END")

            return send

        slow, fast = Stream("t", sender("slow"), "k"), Stream("t", sender("fast"), "k")
        for number in range(3):
            for stream in (slow, fast):
                stream.write(b"%d" % number)
        assert got == {"slow": [], "fast": [b"0", b"1", b"2"]}  # fast was not held up
        gate.set()
        await asyncio.sleep(0.01)
        assert got["slow"] == [b"0", b"1", b"2"]  # in order, once the socket drained

        gate.clear()
        for number in range(MAX_BACKLOG + 10):
            slow.write(b"x%d" % number)
        assert slow.closed  # too far behind: its stream ends (the client resumes by token)
        gate.set()
        await asyncio.wait_for(slow.ended, 5)
        assert got["slow"][-1] == b"END" and len(got["slow"]) <= MAX_BACKLOG + 5

    asyncio.run(main())


def test_eager_runs_an_awaitable_to_its_first_wait_and_hands_back_the_rest() -> None:
    async def main() -> None:
        trail: list[str] = []

        async def quick() -> None:
            trail.append("quick")

        assert eager(quick()) is None and trail == ["quick"]  # done, no task involved
        later = asyncio.get_running_loop().create_future()

        async def waits() -> None:
            trail.append("before")
            trail.append(await later)

        rest = eager(waits())
        assert rest is not None and trail == ["quick", "before"]
        task = asyncio.ensure_future(_await(rest))
        later.set_result("after")
        await task
        assert trail == ["quick", "before", "after"]

    asyncio.run(main())


async def _await(rest: Any) -> None:
    await rest


class _Cycle:
    """What an ASGI server keeps per request: the scope, and ``send`` bound to itself."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.scope = scope
        self.status = 0

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]


def test_a_request_leaves_no_reference_cycle_for_the_collector(tmp_path: Path) -> None:
    """The app keeps the server's ``send`` in the scope while a routed request runs (the
    streams write through it); left there, the request's objects would be a cycle (cycle
    -> scope -> send -> cycle) that only the cyclic collector frees: under load, a
    collection every few dozen requests. A cached answer is freed as soon as it is sent."""
    with SQLiteThreadStore(tmp_path / "threads.db") as store:
        caller = Caller("bob", "acme")
        _, token = store.create_api_token(caller)
        thread_id = store.for_caller(caller).create_thread().thread_id
        app = create_app(make_agent(), store)
        path = f"/v1/ai/threads/{thread_id}"

        async def get() -> tuple[_Cycle, dict[str, Any]]:
            scope: dict[str, Any] = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "GET",
                "scheme": "http",
                "path": path,
                "raw_path": path.encode(),
                "root_path": "",
                "query_string": b"",
                "headers": [(b"authorization", f"Bearer {token}".encode())],
                "client": ("127.0.0.1", 1),
                "server": ("127.0.0.1", 2),
            }
            cycle = _Cycle(scope)

            async def receive() -> Any:
                return {"type": "http.request", "body": b"", "more_body": False}

            await app(scope, receive, cycle.send)
            return cycle, scope

        routed, scope = asyncio.run(get())  # the route answers, and fills the cache
        assert routed.status == 200 and RAW_SEND not in scope
        gc.collect()
        gc.disable()
        try:
            cached, scope = asyncio.run(get())
            assert cached.status == 200 and RAW_SEND not in scope
            gone = weakref.ref(cached)
            del cached, scope
            assert gone() is None, "the request's objects are a cycle"
        finally:
            gc.enable()
