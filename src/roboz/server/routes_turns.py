"""Turns: a user's message starts the agent's turn, client tool results continue it, and a
running turn can be cancelled."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from roboz.agent import ClientToolError
from roboz.agent.request import RunRequest
from roboz.server.errors import ApiError, ErrorBody
from roboz.server.schemas import CancelResponse, ToolResultsRequest, TurnAccepted, TurnRequest
from roboz.server.state import caller_threads, json_response, server_state
from roboz.threads import AgentThreadRecord, AgentThreadStatus, CallerThreads

router = APIRouter(
    prefix="/v1/ai",
    tags=["turns"],
    responses={
        401: {"model": ErrorBody, "description": "No token, or an unknown or revoked one."},
        403: {"model": ErrorBody, "description": "Only the creator or an admin may do this."},
        404: {"model": ErrorBody, "description": "No such thread, or not one the caller sees."},
        409: {
            "model": ErrorBody,
            "description": "The thread is read-only (thread_read_only), busy with a turn "
            "(thread_busy) or waiting for client tool results (client_tool_turn).",
        },
    },
)

Threads = Annotated[CallerThreads, Depends(caller_threads)]


def _accepted(threads: CallerThreads, before: AgentThreadRecord, turn: str | None) -> Response:
    now = threads.store.thread_metadata(before.thread_id)
    body = TurnAccepted(
        thread_id=before.thread_id,
        status=now.status,
        continuation_token=before.continuation_token,
        durable_turn=turn,
    )
    return json_response(body, 202)


@router.post(
    "/threads/{thread_id}/messages",
    status_code=202,
    response_model=TurnAccepted,
    summary="Send a user message: the agent's turn starts and streams into the thread",
)
async def start_turn(
    request: Request, thread_id: str, body: TurnRequest, threads: Threads
) -> Response:
    state = server_state(request)
    record = threads.writable(thread_id)
    if record.status is AgentThreadStatus.CLIENT_TOOL_TURN:
        raise ApiError(
            409,
            "client_tool_turn",
            f"thread {thread_id!r} waits for client tool results; submit them to "
            f"/v1/ai/threads/{thread_id}/tool-results first",
        )
    agent = state.agent_for(record.created_from_agent_id)
    unknown = sorted({g.goal_type for g in body.goals} - set(agent.goal_checks))
    if unknown:
        raise ApiError(
            422,
            "invalid_request",
            f"goals: agent {agent.name!r} has no check for goal type(s) {unknown} "
            f"(known: {sorted(agent.goal_checks)})",
        )
    run_request = RunRequest(
        scope=body.scope,
        viewing_context=body.viewing_context,
        goals=tuple(body.goals),
        client_tools=tuple(body.client_tools),
    )
    turn = await state.turns.start(agent, thread_id, text=body.text, request=run_request)
    return _accepted(threads, record, turn)


@router.post(
    "/threads/{thread_id}/tool-results",
    status_code=202,
    response_model=TurnAccepted,
    summary="Submit what the pending client tool uses returned; the turn goes on",
)
async def submit_tool_results(
    request: Request, thread_id: str, body: ToolResultsRequest, threads: Threads
) -> Response:
    state = server_state(request)
    record = threads.writable(thread_id)
    if record.status is not AgentThreadStatus.CLIENT_TOOL_TURN:
        raise ApiError(
            409,
            "not_waiting_for_tool_results",
            f"thread {thread_id!r} is not waiting for client tool results (its status is "
            f"{record.status.value}); nothing was recorded",
        )
    agent = state.agent_for(record.created_from_agent_id)
    try:
        turn = await state.turns.start(agent, thread_id, results=body.results)
    except ClientToolError as error:
        raise ApiError(400, "invalid_tool_results", str(error)) from None
    return _accepted(threads, record, turn)


@router.post(
    "/threads/{thread_id}/cancel",
    status_code=202,
    response_model=CancelResponse,
    summary="Cancel the thread's running turn (its end is recorded in the thread)",
)
async def cancel_turn(request: Request, thread_id: str, threads: Threads) -> Response:
    state = server_state(request)
    record = threads.changeable(thread_id)
    if await state.turns.cancel_turn(thread_id):
        return json_response(CancelResponse(thread_id=thread_id, cancelled=True), 202)
    durable = state.turns.durable  # a durable cancel reached the turn wherever it runs
    if (
        not durable
        and record.status is AgentThreadStatus.ROBOTO_TURN
        and state.remote_cancel is not None
    ):
        state.remote_cancel(thread_id)
        return json_response(CancelResponse(thread_id=thread_id, cancelled=False), 202)
    where = "queued or running" if durable else "running on this server"
    raise ApiError(409, "no_turn_running", f"thread {thread_id!r} has no turn {where}")
