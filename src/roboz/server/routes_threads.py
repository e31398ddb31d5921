"""``/v1/ai/threads``: create, list, search, read, fork, delete, pin and rate threads."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from roboz.server.errors import ApiError, ErrorBody
from roboz.server.schemas import (
    AgentInfo,
    AgentList,
    CreateThreadRequest,
    ForkRequest,
    Identity,
    PinResponse,
    RateRequest,
    RatingResponse,
    SearchRequest,
    ThreadPageResponse,
)
from roboz.server.state import caller_threads, json_response, server_state
from roboz.threads import AgentThreadRecord, CallerThreads, ThreadPage

router = APIRouter(
    prefix="/v1/ai",
    tags=["threads"],
    responses={
        401: {"model": ErrorBody, "description": "No token, or an unknown or revoked one."},
        404: {"model": ErrorBody, "description": "No such thread, or not one the caller sees."},
        422: {"model": ErrorBody, "description": "The body or a parameter is invalid."},
    },
)

Threads = Annotated[CallerThreads, Depends(caller_threads)]


def _page(page: ThreadPage) -> Response:
    return json_response(
        ThreadPageResponse(threads=page.threads, next_page_token=page.next_page_token)
    )


def _bad_page(error: ValueError) -> ApiError:
    return ApiError(400, "bad_page_token", str(error))


@router.get(
    "/agents",
    response_model=AgentList,
    summary="The agents this server runs, with the goal types each checks",
)
async def list_agents(request: Request, threads: Threads) -> Response:
    state = server_state(request)
    infos = [
        AgentInfo(
            name=name,
            description=agent.description,
            mode=agent.mode.value,
            goal_types=sorted(agent.goal_checks),
        )
        for name, agent in state.agents.items()
    ]
    return json_response(AgentList(agents=infos, default=state.default_agent))


@router.get("/me", response_model=Identity, summary="Who the caller's token acts as")
async def whoami(threads: Threads) -> Response:
    caller = threads.caller
    return json_response(Identity(user_id=caller.user_id, org_id=caller.org_id, admin=caller.admin))


@router.post(
    "/threads", status_code=201, response_model=AgentThreadRecord, summary="Create a thread"
)
async def create_thread(request: Request, body: CreateThreadRequest, threads: Threads) -> Response:
    state = server_state(request)
    agent = body.agent or state.default_agent
    if agent not in state.agents:
        raise ApiError(
            400, "unknown_agent", f"this server runs no agent {agent!r} (see GET /v1/ai/agents)"
        )
    record = threads.create_thread(title=body.title, visibility=body.visibility, agent_id=agent)
    return json_response(record, 201)


@router.get(
    "/threads",
    response_model=ThreadPageResponse,
    summary="List the threads the caller may read, newest first, with their pins",
)
async def list_threads(
    threads: Threads,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    page_token: Annotated[str | None, Query(max_length=2000)] = None,
    pinned: bool = False,
) -> Response:
    try:
        return _page(threads.list_threads(limit=limit, page_token=page_token, pinned_only=pinned))
    except ValueError as error:
        raise _bad_page(error) from None


@router.post(
    "/threads/search",
    response_model=ThreadPageResponse,
    summary="Search titles and message text of the threads the caller may read",
)
async def search_threads(body: SearchRequest, threads: Threads) -> Response:
    if not body.query.strip():
        raise ApiError(422, "invalid_request", "query: the search text is empty")
    try:
        page = threads.search_threads(body.query, limit=body.limit, page_token=body.page_token)
    except ValueError as error:
        raise _bad_page(error) from None
    return _page(page)


@router.get("/threads/{thread_id}", response_model=AgentThreadRecord, summary="Read a thread")
async def get_thread(request: Request, thread_id: str, threads: Threads) -> Response:
    record = threads.get_thread(thread_id)
    body = record.model_dump_json().encode()
    server_state(request).thread_cache.offer(threads.store, record, body)
    return Response(body, media_type="application/json")


@router.delete("/threads/{thread_id}", status_code=204, summary="Delete a thread")
async def delete_thread(request: Request, thread_id: str, threads: Threads) -> Response:
    threads.delete_thread(thread_id)
    server_state(request).hub.changed(thread_id)  # its streams end
    return Response(status_code=204)


@router.post(
    "/threads/{thread_id}/fork",
    status_code=201,
    response_model=AgentThreadRecord,
    summary="Copy a thread up to a message into a new, writable thread of the caller's",
)
async def fork_thread(thread_id: str, body: ForkRequest, threads: Threads) -> Response:
    fork = threads.fork_thread(
        thread_id, body.message_sequence_num, title=body.title, visibility=body.visibility
    )
    return json_response(fork, 201)


@router.put("/threads/{thread_id}/pin", response_model=PinResponse, summary="Pin for the caller")
async def pin_thread(thread_id: str, threads: Threads) -> Response:
    pinned_at = threads.set_pinned(thread_id, True)
    return json_response(PinResponse(thread_id=thread_id, pinned_at=pinned_at))


@router.delete("/threads/{thread_id}/pin", response_model=PinResponse, summary="Unpin")
async def unpin_thread(thread_id: str, threads: Threads) -> Response:
    threads.set_pinned(thread_id, False)
    return json_response(PinResponse(thread_id=thread_id, pinned_at=None))


@router.post(
    "/threads/{thread_id}/rate",
    response_model=RatingResponse,
    summary="Rate a thread or one of its messages (open on read-only threads too)",
)
async def rate_thread(thread_id: str, body: RateRequest, threads: Threads) -> Response:
    created = threads.rate_thread(
        thread_id, body.rating, sequence_num=body.message_sequence_num, comment=body.comment
    )
    return json_response(
        RatingResponse(
            thread_id=thread_id,
            rating=body.rating,
            message_sequence_num=body.message_sequence_num,
            created=created,
        )
    )
