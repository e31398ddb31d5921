"""Deltas: one at a time (``GET .../delta``) or as a live Server-Sent Events stream.

The stream sends exactly the deltas ``delta_since`` gives, in order, each as an event
``delta`` whose ``id`` is its continuation token, so a client that reconnects with
``Last-Event-ID`` (or ``?continuation_token=``) resumes where it was, resets included. A
comment line keeps idle connections open (and each one re-reads the thread, so writes made
outside any server still arrive, within ``keepalive_s``). If the thread disappears the
stream sends an ``error`` event and ends; at server shutdown it ends. The hub pushes the
events (``hub``, ``sse``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response, StreamingResponse

from roboz.server.errors import ErrorBody
from roboz.server.hub import is_empty, sse_event
from roboz.server.sse import EventStream
from roboz.server.state import caller_threads, json_response, server_state
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
    response_class=StreamingResponse,  # its schema: text/event-stream
    responses={200: {"content": {"text/event-stream": {}}, "description": "delta events"}},
    summary="Live deltas as Server-Sent Events (resume with Last-Event-ID)",
)
async def stream_deltas(
    request: Request,
    thread_id: str,
    threads: Threads,
    continuation_token: Token = None,
    last_event_id: LastEventId = None,
) -> EventStream:
    state = server_state(request)
    token = last_event_id or continuation_token
    # Read before answering, so a bad token or an unseen thread is a JSON 4xx; the stream
    # reads again from this delta's token once it joins the hub, so nothing is missed.
    first = api_delta(threads.delta_since(thread_id, token))
    event = (
        b""
        if is_empty(first)
        else sse_event("delta", first.model_dump_json(), first.continuation_token)
    )
    return EventStream(state.hub, thread_id, event, first.continuation_token)
