"""The application class of ``roboz serve``: FastAPI, with what the hot paths need in front.

- Every routed request keeps the ASGI server's own ``send`` in its scope (``sse.RAW_SEND``)
  while it runs, so the events the hub pushes to streams skip the middleware wrappers that
  only look at a response's start.
- ``GET /v1/ai/threads/{id}`` is answered from :class:`ThreadCache` before any routing when
  it can be: the body the route last produced for that thread, while the thread's revision
  is the same and no run holds it, for a caller whose token is valid and who may read the
  thread. The route fills the cache; anything else (no entry, a changed thread, a refusal)
  goes to the route as if the cache were not there, so errors and the body are the route's
  own. A thread's JSON is the same for every reader (``pinned_at`` is None on single
  reads), so one entry serves them all.
- Whether the token and the thread are still as last read is asked of the store's change
  stamp (SQLite: ``PRAGMA data_version``, which moves when another connection or process
  commits, and a count of this process's own writes): while it is unchanged neither row is
  read again, and a token revoked by ``roboz serve tokens revoke`` in another process
  changes it like any commit. A store that cannot tell (PostgreSQL) reads both rows on
  every request.
- Under ``roboz serve`` (uvicorn) the stamp is read once per round of the event loop, not
  once per request (under load a round runs several requests): see
  :meth:`ThreadCache.stamp` for why that still sees every commit made before a request was
  sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from roboz.server.sse import RAW_SEND
from roboz.threads import AgentThreadRecord, Caller, can_read
from roboz.threads.tokens import decode_token

if TYPE_CHECKING:
    from roboz.server.state import ServerState

access_log = logging.getLogger("roboz.server.access")

_JSON = (b"content-type", b"application/json")


_PREFIX = "/v1/ai/threads/"
_KNOWN_CALLERS = 4096


@dataclass(slots=True)
class _Entry:
    revision: int
    record: AgentThreadRecord  # who may read it (org, creator, visibility)
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    """The response's headers (a tuple: the server may not change them for later replies)."""
    checked: Hashable | None = None
    """The store's change stamp when the thread was last seen at ``revision``, unheld."""


class ThreadCache:
    """The last JSON body of ``GET`` thread by its path, bounded in entries and bytes, and
    the callers of the tokens checked since the store last changed."""

    def __init__(self, max_entries: int = 1024, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._stamp: Hashable | None = None
        self._callers: dict[bytes, Caller] = {}
        """By Authorization header: callers whose token was valid at ``_stamp``."""
        self._round: Hashable | None = None
        """The stamp read in this round of the event loop (``stamp``)."""
        self.share_stamps = False
        """Read the stamp once per round of the loop: only for an ASGI server that runs each
        request in a task of its own, made once the request arrived (uvicorn does)."""

    def get(self, thread_id: str) -> _Entry | None:
        return self._entries.get(_PREFIX + thread_id)

    def drop(self, thread_id: str) -> None:
        entry = self._entries.pop(_PREFIX + thread_id, None)
        if entry is not None:
            self._bytes -= len(entry.body)

    def offer(self, store: Any, record: AgentThreadRecord, body: bytes) -> None:
        """Keep ``body`` (``record`` as the API shows it) if it is the thread as it is now and
        no run holds the thread (a held thread changes, or its run may have died)."""
        thread_id = record.thread_id
        self.drop(thread_id)
        if len(body) > self.max_bytes // 16:
            return
        revision = decode_token(record.continuation_token, thread_id)
        stamp = store.change_stamp()
        if store.thread_state(thread_id) != (revision, False):
            return
        headers = (_JSON, (b"content-length", b"%d" % len(body)))
        self._entries[_PREFIX + thread_id] = _Entry(revision, record, body, headers, stamp)
        self._bytes += len(body)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= len(oldest.body)

    def stamp(self, store: Any) -> Hashable | None:
        """The store's change stamp, read once for every request the event loop runs until
        its next round.

        Shared, it must still tell each request of every commit made before the request was
        sent. It does: when it is read, a callback is queued that forgets it, and the loop
        runs callbacks in the order they were queued. A request that gets the shared stamp
        runs before that callback, so the step running it was queued before the stamp was
        read, and that step could only be queued once the request had arrived: the request
        was received, hence a commit before its sending made, before the stamp was read.
        This needs the ASGI server to run each request in a task of its own, made once the
        request arrived (``share_stamps``: uvicorn does; a server that reads the next
        request of a connection inside a step queued earlier does not), and every step of
        that task to come from the loop's queue, which holds for tasks made by the default
        task factory (an eager factory runs a task's first step inside the server's read
        callback). Otherwise, or off an asyncio loop, each request reads the stamp itself."""
        stamp = self._round
        if stamp is not None:
            return stamp
        stamp = store.change_stamp()
        if stamp is None or not self.share_stamps:
            return stamp
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return stamp
        if loop.get_task_factory() is None and asyncio.current_task(loop) is not None:
            self._round = stamp
            loop.call_soon(self._end_round)
        return stamp

    def _end_round(self) -> None:
        self._round = None

    def caller(self, store: Any, authorization: bytes, stamp: Hashable | None) -> Caller | None:
        """Who ``authorization`` (the header's value) authenticates, read from the store
        unless its token was found valid since the store last changed."""
        if stamp is not None and stamp == self._stamp:
            known = self._callers.get(authorization)
            if known is not None:
                return known
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer":
            return None
        caller = store.verify_api_token(token.strip())
        if caller is not None and stamp is not None:
            if stamp != self._stamp or len(self._callers) >= _KNOWN_CALLERS:
                self._stamp = stamp
                self._callers = {}
            self._callers[authorization] = caller
        return caller

    async def answer(self, store: Any, scope: Scope, send: Send, entry: _Entry) -> bool:
        """Send ``entry`` if the request may have it and it is current; False: the route
        answers instead (a refusal, a changed thread), as if there were no cache."""
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
                break
        if authorization is None:
            return False
        started = time.perf_counter()
        # Taken before any read: if it is unchanged later, so is what the reads said.
        stamp = self.stamp(store)
        caller = self.caller(store, authorization, stamp)
        if caller is None or not can_read(caller, entry.record):
            return False  # the route answers (401, or 404 as for a missing thread)
        if stamp is None or entry.checked != stamp:
            thread_id = entry.record.thread_id
            if store.thread_state(thread_id) != (entry.revision, False):
                self.drop(thread_id)
                return False
            entry.checked = stamp
        await send({"type": "http.response.start", "status": 200, "headers": entry.headers})
        await send({"type": "http.response.body", "body": entry.body})
        log_access(scope, 200, started, caller.user_id)
        return True

    def lookup(self, path: str) -> _Entry | None:
        return self._entries.get(path)


def log_access(scope: Scope, status: int, started: float, user: str | None) -> None:
    """The access log's line (one JSON object) for a request answered with ``status``."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    client = scope.get("client")
    entry = {
        "method": scope["method"],
        "path": scope["path"],
        "status": status,
        "ms": round((time.perf_counter() - started) * 1000, 2),
        "user": user,
        "client": client[0] if client else None,
    }
    access_log.info(json.dumps(entry))


class ThreadApp(FastAPI):
    """FastAPI, keeping the server's ``send`` for the streams and answering ``GET`` of an
    unchanged thread from the cache before any routing."""

    roboz: ServerState | None = None
    """Set by ``create_app``: what the routes reach through ``app.state.roboz``."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        state = self.roboz
        if scope["method"] == "GET" and not scope["query_string"] and state is not None:
            cache = state.thread_cache
            entry = cache.lookup(scope["path"])
            if entry is not None and await cache.answer(state.store, scope, send, entry):
                return
        # The server's request cycle holds the scope, so ``send`` (its bound method) in the
        # scope is a reference cycle: removed when the request ends, every request's objects
        # are freed at once instead of waiting for the cyclic collector.
        scope[RAW_SEND] = send
        try:
            await super().__call__(scope, receive, send)
        finally:
            scope.pop(RAW_SEND, None)


__all__ = ["ThreadApp", "ThreadCache"]
