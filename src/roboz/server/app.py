"""The ASGI application of ``roboz serve``: :func:`create_app`.

Routes live under ``/v1/ai`` (the thread API, ``routes_threads``, ``routes_turns``,
``routes_stream``); the schema is at ``/openapi.json``; ``/`` is left free for a web UI and
other streams (an AG-UI endpoint) mount beside ``/v1/ai`` on the same hub and turns. Two
plain ASGI layers wrap it: a request-body limit (a larger body is a 413 JSON error, read by
nobody) and a structured access log (one JSON object per request on the
``roboz.server.access`` logger).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from roboz.agent import Agent
from roboz.server import routes_stream, routes_threads, routes_turns
from roboz.server.errors import install_error_handlers
from roboz.server.fast import ThreadApp, access_log, log_access
from roboz.server.frontends import mount_frontends
from roboz.server.hub import ThreadHub
from roboz.server.state import ServerState
from roboz.server.turns import TurnManager, Turns
from roboz.threads import AccessStore

if TYPE_CHECKING:
    from roboz.durable import DurableClient

DEFAULT_MAX_BODY = 1024 * 1024
_DRAIN_LIMIT = 64 * 1024 * 1024


def agents_by_name(agents: Agent | Sequence[Agent] | Mapping[str, Agent]) -> dict[str, Agent]:
    """The agents to serve by name; TypeError or ValueError saying what is wrong."""
    if isinstance(agents, Agent):
        found = {agents.name: agents}
    elif isinstance(agents, Mapping):
        found = dict(agents)
    elif isinstance(agents, list | tuple):
        listed = cast("Sequence[object]", agents)
        for item in listed:
            if not isinstance(item, Agent):
                raise TypeError(f"{item!r} is a {type(item).__name__}, not a roboz Agent")
        found = {cast(Agent, item).name: cast(Agent, item) for item in listed}
    else:
        raise TypeError(
            f"{type(agents).__name__} is not a roboz Agent (nor a list or dict of Agents)"
        )
    if not found:
        raise ValueError("serve at least one agent")
    for name, agent in found.items():
        if not isinstance(agent, Agent):
            raise TypeError(f"{name!r} is a {type(agent).__name__}, not a roboz Agent")
    return found


def create_app(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    store: AccessStore,
    *,
    keepalive_s: float = 15.0,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    shutdown_grace_s: float = 30.0,
    postgres_feed: bool | None = None,
    log_requests: bool = True,
    durable: DurableClient | None = None,
) -> FastAPI:
    """The thread API serving ``agents`` (the first is the default for new threads) over
    ``store`` (a SQLiteThreadStore or PostgresThreadStore).

    With a PostgreSQL store (``postgres_feed`` None or True) the server listens for the
    writes and cancels of other servers on the same database, so any number of them share
    the store. At shutdown running turns get ``shutdown_grace_s`` seconds to finish before
    they are cancelled (and their cancellation recorded).

    With ``durable`` (a :class:`~roboz.durable.DurableClient` of the store's database and
    schema) turns are not run here: they are queued for the ``roboz worker`` processes of
    the client's queue, whose agents must have the names of ``agents`` (``durable_turns``).
    """
    if store.read_only:
        raise ValueError("the server's store must be writable: turns write their threads")
    served = agents_by_name(agents)
    hub = ThreadHub(store.delta_since, keepalive_s)
    if durable is not None:
        from roboz.server.durable_turns import DurableTurns, check_same_database

        check_same_database(store, durable, postgres_feed)
        turns: Turns = DurableTurns(durable, hub.changed)
    else:
        turns = TurnManager(store, hub.changed)
    state = ServerState(store=store, hub=hub, turns=turns, agents=served, keepalive_s=keepalive_s)
    feed: Any = None
    if postgres_feed is not False and hasattr(store, "schema") and hasattr(store, "url"):
        from roboz.server.pg_feed import PostgresFeed

        feed = PostgresFeed(store, state)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncGenerator[None]:
        hub.bind(asyncio.get_running_loop())
        if feed is not None:
            await feed.start()
        try:
            yield
        finally:
            hub.close()
            await state.turns.drain(shutdown_grace_s)
            if feed is not None:
                await feed.stop()

    app = ThreadApp(
        title="RoboZ thread API",
        version=_version(),
        summary="Threads of RoboZ agents: turns, deltas, live streams, pins and ratings.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.roboz = state
    app.roboz = state
    install_error_handlers(app)
    app.include_router(routes_threads.router)
    app.include_router(routes_turns.router)
    app.include_router(routes_stream.router)
    mount_frontends(app)

    @app.get("/v1/health", tags=["server"], summary="Liveness (no token needed)")
    async def health() -> dict[str, Any]:  # pyright: ignore[reportUnusedFunction]
        return {"status": "stopping" if hub.closed else "ok", "turns": state.turns.count}

    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if log_requests:
        app.add_middleware(AccessLog)
    return app


def _version() -> str:
    from roboz import __version__

    return __version__


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, before any route parses them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is None and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body at all
            return
        if length is not None and length.isdigit() and int(length) <= self.max_bytes:
            await self.app(scope, receive, send)
            return
        # No length (chunked) or too long: read it here, up to the limit.
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                # Read the rest (up to a bound) so the client sees the answer, not a reset.
                seen = len(body)
                while message.get("more_body", False) and seen < _DRAIN_LIMIT:
                    message = await receive()
                    seen += len(message.get("body", b""))
                await _reply(
                    send,
                    413,
                    "body_too_large",
                    f"the request body is over {self.max_bytes} bytes; nothing was recorded",
                )
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


class AccessLog:
    """One JSON line per request: method, path, status, duration, user (when known)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not access_log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            log_access(scope, status, started, scope.get("state", {}).get("user"))
