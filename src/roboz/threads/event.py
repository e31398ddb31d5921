"""Events a UI receives while a thread's reply is produced, and how content maps onto them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from roboz.threads.content import AgentToolResultContent, AgentToolUseContent


class AgentStartTextEvent(BaseModel):
    """Text generation of a reply has begun."""


class AgentTextDeltaEvent(BaseModel):
    """The next piece of streamed reply text."""

    text: str


class AgentTextEndEvent(BaseModel):
    """Text generation of a reply has ended."""


class AgentToolUseEvent(BaseModel):
    """The agent is calling a tool."""

    tool_use_id: str
    name: str
    input: dict[str, Any] | None = None


class AgentToolResultEvent(BaseModel):
    """A tool call has finished."""

    tool_use_id: str
    name: str
    success: bool
    output: dict[str, Any] | None = None
    """The tool's output as an object: the legacy envelope when present, else the payload
    (text wrapped as ``{"text": ...}``, an array as ``{"items": [...]}``)."""
    runtime_ms: int | None = None


class AgentErrorEvent(BaseModel):
    """Generating the reply failed or was cancelled."""

    error_message: str
    error_code: str | None = None


AgentEvent = (
    AgentStartTextEvent
    | AgentTextDeltaEvent
    | AgentTextEndEvent
    | AgentToolUseEvent
    | AgentToolResultEvent
    | AgentErrorEvent
)
"""Any event of a reply in progress."""


def tool_use_event(block: AgentToolUseContent) -> AgentToolUseEvent:
    """The UI event announcing the tool call ``block`` records."""
    return AgentToolUseEvent(tool_use_id=block.tool_use_id, name=block.tool_name, input=block.input)


def tool_result_event(block: AgentToolResultContent) -> AgentToolResultEvent:
    """The UI event for a finished tool call; success means status "success"."""
    output: dict[str, Any] | None
    if block.raw_response is not None:
        output = block.raw_response
    else:
        payload = block.payload
        if isinstance(payload, dict):
            output = payload
        elif isinstance(payload, list):
            output = {"items": payload}
        elif isinstance(payload, str):
            output = {"text": payload}
        else:
            output = None
    return AgentToolResultEvent(
        tool_use_id=block.tool_use_id,
        name=block.tool_name,
        success=block.status == "success",
        output=output,
        runtime_ms=block.runtime_ms,
    )
