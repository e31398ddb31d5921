"""``POST /v1/agui``: run a turn of a served agent as an AG-UI run, streamed as AG-UI events.

The body is AG-UI's ``RunAgentInput``. Its ``threadId`` names a RoboZ thread the caller may
write (one made with ``POST /v1/ai/threads``), or any other id a frontend chose: that one
names a private thread of the caller's, made on first use (the same id from another user is
another thread). What the run does follows the thread:

- the thread waits for client tool results: the input's tool messages answering its
  pending tool uses are submitted (their content parsed as JSON when it is JSON);
- else the input's last message must be the user's: its text starts the agent's turn, with
  the input's ``tools`` as the turn's client tools (the frontend runs them), its ``context``
  as the viewing context, and ``forwardedProps.roboz`` (``goals``, ``scope``,
  ``viewing_context``) as in ``POST .../messages``.

``?agent=NAME`` picks the served agent of a thread made here. Refusals before the run
starts are the thread API's JSON errors (4xx, nothing recorded); once it runs, the stream is
RUN_STARTED, MESSAGES_SNAPSHOT and STATE_SNAPSHOT (the thread as it was), the events of its
deltas (:mod:`roboz.server.agui.translate`) and RUN_FINISHED or RUN_ERROR. Dropping the
connection does not stop the turn (``POST /v1/ai/threads/{id}/cancel`` does): the thread has
it all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, cast

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent, RunStartedEvent, ToolMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roboz.server import routes_turns
from roboz.server.agui.translate import RunTranslator, pending_tool_uses
from roboz.server.errors import ApiError, ErrorBody, mapped
from roboz.server.schemas import MAX_TEXT, ToolResultsRequest, TurnRequest
from roboz.server.state import ServerState, caller_threads, server_state
from roboz.threads import (
    AgentGoal,
    AgentThreadRecord,
    AgentThreadStatus,
    AnalysisScope,
    CallerThreads,
    ClientToolSpec,
    ClientViewingContext,
    ThreadNotFoundError,
)

router = APIRouter(
    prefix="/v1/agui",
    tags=["ag-ui"],
    responses={
        401: {"model": ErrorBody, "description": "No token, or an unknown or revoked one."},
        404: {"model": ErrorBody, "description": "No such thread, or not one the caller sees."},
        409: {"model": ErrorBody, "description": "The thread is busy, read-only or waiting."},
        422: {"model": ErrorBody, "description": "The input is not a run RoboZ can start."},
    },
)

Threads = Annotated[CallerThreads, Depends(caller_threads)]


class RobozProps(BaseModel):
    """``forwardedProps.roboz``: what a RoboZ turn takes beyond AG-UI's input."""

    model_config = ConfigDict(extra="forbid")

    goals: list[AgentGoal] = Field(default_factory=list[AgentGoal], max_length=64)
    scope: AnalysisScope | None = None
    viewing_context: ClientViewingContext | None = None


def _invalid(message: str) -> ApiError:
    return ApiError(422, "invalid_request", message)


def _parse(body: bytes) -> RunAgentInput:
    try:
        return RunAgentInput.model_validate_json(body)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(400, "malformed_json", "the body is not valid JSON") from None
        where = ".".join(str(p) for p in first["loc"])
        raise _invalid(f"not an AG-UI RunAgentInput: {where}: {first['msg']}") from None


def _own_thread_id(threads: CallerThreads, agui_thread_id: str) -> str:
    """The caller's own thread for a frontend's thread id that is not a RoboZ thread."""
    caller = threads.caller
    key = f"{caller.org_id}\0{caller.user_id}\0{agui_thread_id}".encode()
    return f"agui_{hashlib.sha256(key).hexdigest()[:32]}"


def _existing(threads: CallerThreads, agui_thread_id: str) -> tuple[AgentThreadRecord | None, str]:
    """The thread a frontend's id names (None: not made yet) and its RoboZ id."""
    if not agui_thread_id or len(agui_thread_id) > 200:
        raise _invalid("threadId must be 1 to 200 characters")
    try:
        record = threads.get_thread(agui_thread_id)
    except ThreadNotFoundError:
        pass
    else:
        threads.writable(record.thread_id)
        return record, record.thread_id
    own = _own_thread_id(threads, agui_thread_id)
    try:
        return threads.get_thread(own), own
    except ThreadNotFoundError:
        return None, own


def _create(
    state: ServerState, threads: CallerThreads, thread_id: str, agent: str | None
) -> AgentThreadRecord:
    name = agent or state.default_agent
    if name not in state.agents:
        raise ApiError(400, "unknown_agent", f"this server runs no agent {name!r}")
    caller = threads.caller
    with contextlib.suppress(Exception):  # made by a concurrent first run: use that one
        threads.store.create_thread(
            thread_id=thread_id,
            org_id=caller.org_id,
            created_by=caller.user_id,
            created_by_principal=caller.principal,
            created_from_agent_id=name,
        )
    return threads.get_thread(thread_id)


def _user_text(run: RunAgentInput) -> str:
    if not run.messages or run.messages[-1].role != "user":
        raise _invalid(
            "the input's last message must be the user's (or tool results the thread waits for)"
        )
    content: Any = run.messages[-1].content
    if isinstance(content, str):
        text = content
    else:
        kinds = {getattr(part, "type", "?") for part in content}
        if kinds - {"text"}:
            raise _invalid(f"user message parts {sorted(kinds - {'text'})} are not supported")
        text = "\n".join(part.text for part in content)
    if not text.strip():
        raise _invalid("the user's message is empty")
    if len(text) > MAX_TEXT:
        raise _invalid(f"the user's message is over {MAX_TEXT} characters")
    return text


def _turn_request(run: RunAgentInput, text: str) -> TurnRequest:
    props: Any = run.forwarded_props
    extra: Any = cast("dict[str, Any]", props).get("roboz") if isinstance(props, dict) else None
    try:
        roboz = RobozProps.model_validate(extra or {})
        tools = [
            ClientToolSpec(
                name=tool.name,
                description=tool.description,
                input_schema=tool.parameters or {"type": "object", "properties": {}},
            )
            for tool in run.tools or []
        ]
        context = roboz.viewing_context
        if context is None and run.context:
            entries = [{"description": c.description, "value": c.value} for c in run.context]
            context = ClientViewingContext(misc_context={"ag_ui_context": entries})
        return TurnRequest(
            text=text,
            client_tools=tools,
            scope=roboz.scope,
            viewing_context=context,
            goals=roboz.goals,
        )
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise _invalid(f"{where}: {first.get('msg', 'invalid')}") from None


def _tool_results(run: RunAgentInput, record: AgentThreadRecord) -> dict[str, Any]:
    pending = set(pending_tool_uses(record))
    results: dict[str, Any] = {}
    for message in run.messages:
        if isinstance(message, ToolMessage) and message.tool_call_id in pending:
            content: Any = message.content
            if not isinstance(content, str):
                content = "\n".join(getattr(part, "text", "") for part in content)
            try:
                results[message.tool_call_id] = json.loads(content)
            except ValueError:
                results[message.tool_call_id] = content
    return results


@router.post(
    "",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "AG-UI events"}},
    summary="Run a turn as an AG-UI run (body: RunAgentInput; events as Server-Sent Events)",
)
async def run_agent(
    request: Request,
    threads: Threads,
    agent: Annotated[str | None, Query(max_length=200)] = None,
) -> StreamingResponse:
    state = server_state(request)
    run = _parse(await request.body())
    record, thread_id = _existing(threads, run.thread_id)
    if record is not None and record.status is AgentThreadStatus.CLIENT_TOOL_TURN:
        results = _tool_results(run, record)
        if not results:
            raise ApiError(
                409,
                "client_tool_turn",
                f"thread {thread_id!r} waits for results of tool calls "
                f"{pending_tool_uses(record)}; send them as tool messages",
            )
        body = ToolResultsRequest(results=results)
        started = await routes_turns.submit_tool_results(request, thread_id, body, threads)
    else:
        turn = _turn_request(run, _user_text(run))
        made = record is None
        if record is None:
            record = _create(state, threads, thread_id, agent)
        try:
            started = await routes_turns.start_turn(request, thread_id, turn, threads)
        except BaseException:
            if made:  # refused (e.g. an unknown goal type): the new thread goes too
                threads.store.delete_thread(thread_id)
            raise
    del started  # accepted: the run holds the thread; its writes follow ``record``'s token
    subscription = state.hub.subscribe(thread_id)
    return StreamingResponse(
        _events(state, threads, subscription, run, record),
        media_type=EventEncoder().get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _events(
    state: ServerState,
    threads: CallerThreads,
    subscription: Any,
    run: RunAgentInput,
    before: AgentThreadRecord,
) -> AsyncIterator[bytes]:
    encoder = EventEncoder()

    def encoded(events: list[BaseEvent]) -> bytes:
        return "".join(encoder.encode(event) for event in events).encode()

    thread_id, token = before.thread_id, before.continuation_token
    translator = RunTranslator(before)
    try:
        yield encoded(
            [RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id), *translator.start()]
        )
        while True:
            ended = not state.turns.running(thread_id) or state.hub.closed
            subscription.mark()
            try:
                delta = threads.delta_since(thread_id, token)
            except Exception as error:
                code = (mapped(error) or (500, "internal_error"))[1]
                yield encoded([RunErrorEvent(message=str(error), code=code)])
                return
            token = delta.continuation_token
            events = translator.apply(delta)
            if ended:
                events += translator.finish(run.thread_id, run.run_id)
            if events:
                yield encoded(events)
            if ended:
                return
            if not await subscription.wait(state.keepalive_s):
                yield b": keepalive\n\n"
    finally:
        subscription.close()
