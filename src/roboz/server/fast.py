"""The application class of ``roboz serve``: FastAPI, with what the hot paths need in front.

- Every request keeps the ASGI server's own ``send`` in its scope (``sse.RAW_SEND``), so the
  events the hub pushes to streams skip the middleware wrappers that only look at a
  response's start.
- ``GET /v1/ai/threads/{id}`` is answered from :class:`ThreadCache` when it can be: the body
  the route last produced for that thread, while the thread's revision is the same and no
  run holds it (one indexed row read says so), for a caller whose token is valid and who may
  read the thread. The route fills the cache; anything else (no entry, a changed thread, a
  refusal) goes to the route as if the cache were not there, so errors and the body are the
  route's own. A thread's JSON is the same for every reader (``pinned_at`` is None on
  single reads), so one entry serves them all.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from roboz.server.sse import RAW_SEND
from roboz.threads import AgentThreadRecord, can_read
from roboz.threads.tokens import decode_token

if TYPE_CHECKING:
    from roboz.server.state import ServerState

access_log = logging.getLogger("roboz.server.access")

_THREAD_PATH = re.compile(r"/v1/ai/threads/([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})")
_JSON = (b"content-type", b"application/json")


@dataclass(frozen=True, slots=True)
class _Entry:
    revision: int
    record: AgentThreadRecord  # who may read it (org, creator, visibility)
    body: bytes


class ThreadCache:
    """The last JSON body of ``GET`` thread by thread id, bounded in entries and bytes."""

    def __init__(self, max_entries: int = 1024, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def get(self, thread_id: str) -> _Entry | None:
        return self._entries.get(thread_id)

    def drop(self, thread_id: str) -> None:
        entry = self._entries.pop(thread_id, None)
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
        if store.thread_state(thread_id) != (revision, False):
            return
        self._entries[thread_id] = _Entry(revision, record, body)
        self._bytes += len(body)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= len(oldest.body)


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


def _bearer(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class ThreadApp(FastAPI):
    """FastAPI, keeping the server's ``send`` for the streams and answering ``GET`` of an
    unchanged thread from the cache."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[RAW_SEND] = send
            if scope["method"] == "GET" and await self._cached(scope, send):
                return
        await super().__call__(scope, receive, send)

    async def _cached(self, scope: Scope, send: Send) -> bool:
        found = _THREAD_PATH.fullmatch(scope["path"])
        if found is None or scope.get("query_string"):
            return False
        state: ServerState = self.state.roboz
        thread_id = found.group(1)
        entry = state.thread_cache.get(thread_id)
        token = _bearer(scope) if entry is not None else None
        if entry is None or token is None:
            return False
        started = time.perf_counter()
        store = state.store
        caller = store.verify_api_token(token)
        if caller is None or not can_read(caller, entry.record):
            return False  # the route answers (401, or 404 as for a missing thread)
        if store.thread_state(thread_id) != (entry.revision, False):
            state.thread_cache.drop(thread_id)
            return False
        headers = [_JSON, (b"content-length", b"%d" % len(entry.body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": entry.body})
        log_access(scope, 200, started, caller.user_id)
        return True


__all__ = ["ThreadApp", "ThreadCache"]
