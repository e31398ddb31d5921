"""Deltas: one at a time (``GET .../delta``) or as a live Server-Sent Events stream.

The stream sends exactly the deltas ``delta_since`` gives, in order, each as an event
``delta`` whose ``id`` is its continuation token, so a client that reconnects with
``Last-Event-ID`` (or ``?continuation_token=``) resumes where it was, resets included. A
comment line keeps idle connections open (and each one re-reads the thread, so writes made
outside any server still arrive, within ``keepalive_s``). If the thread disappears the
stream sends an ``error`` event and ends; at server shutdown it ends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response, StreamingResponse

from roboz.server.errors import ErrorBody, mapped
from roboz.server.hub import Subscription, is_empty, sse_event
from roboz.server.state import ServerState, caller_threads, json_response, server_state
from roboz.threads import AgentThreadDelta, CallerThreads, api_delta

router = APIRouter(
    prefix="/v1/ai",
    tags=["deltas"],
    responses={
        400: {"model": ErrorBody, "description": "The continuation token is not this thread's."},
        401: {"model": ErrorBody, "description": "No token, or an unknown or revoked one."},
        404: {"model": ErrorBody, "description": "No such thread, or not one the caller sees."},
    },
)

Threads = Annotated[CallerThreads, Depends(caller_threads)]
Token = Annotated[str | None, Query(max_length=2000)]
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=2000)]


@router.get(
    "/threads/{thread_id}/delta",
    response_model=AgentThreadDelta,
    summary="What changed since a continuation token (none: the whole thread)",
)
async def get_delta(thread_id: str, threads: Threads, continuation_token: Token = None) -> Response:
    return json_response(threads.delta_since(thread_id, continuation_token))


@router.get(
    "/threads/{thread_id}/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "delta events"}},
    summary="Live deltas as Server-Sent Events (resume with Last-Event-ID)",
)
async def stream_deltas(
    request: Request,
    thread_id: str,
    threads: Threads,
    continuation_token: Token = None,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    state = server_state(request)
    token = last_event_id or continuation_token
    subscription = state.hub.subscribe(thread_id)
    try:
        # Read before answering, so a bad token or an unseen thread is a JSON 4xx; the
        # subscription came first, so nothing written after this read is missed.
        first = api_delta(threads.delta_since(thread_id, token))
    except BaseException:
        subscription.close()
        raise
    return StreamingResponse(
        _events(state, subscription, first),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _events(
    state: ServerState, subscription: Subscription, first: AgentThreadDelta
) -> AsyncIterator[bytes]:
    hub, store = state.hub, state.store
    try:
        yield b"retry: 1000\n: connected\n\n"
        token = first.continuation_token
        if not is_empty(first):
            yield sse_event("delta", first.model_dump_json(), token)
        while not hub.closed:
            if not await subscription.wait(state.keepalive_s):
                # Idle: keep the connection open, and read anyway, so a write no server was
                # told of (another process over a SQLite file) still arrives.
                yield b": keepalive\n\n"
            if hub.closed:
                break
            subscription.mark()
            try:
                encoded = await hub.encoded_delta(subscription, token, store.delta_since)
            except Exception as error:
                status, code = mapped(error) or (500, "internal_error")
                body = {"error": {"code": code, "message": str(error), "status": status}}
                yield sse_event("error", json.dumps(body))
                return
            if encoded.event is not None:
                yield encoded.event
            token = encoded.token
    finally:
        subscription.close()
