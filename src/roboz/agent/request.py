"""What a caller gives one run beyond its messages, and answering a client tool turn.

A ``RunRequest`` (scope, viewing context, goals, client tools) is kept on the thread when a
persisted run starts, so ``submit_tool_results`` continues the run with the same client tools,
scope and viewing context, in whichever process it is called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roboz.agent.client_tools import ClientToolError, ClientToolResult
from roboz.agent.rows import action_of
from roboz.agent.transcript import Transcript
from roboz.models import Message, Role
from roboz.threads import (
    AgentGoal,
    AgentThreadRecord,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
    AnalysisScope,
    ClientToolSpec,
    ClientViewingContext,
    ThreadNotFoundError,
    ThreadStore,
)
from roboz.tools import Tool


@dataclass(frozen=True)
class RunRequest:
    scope: AnalysisScope | None = None
    viewing_context: ClientViewingContext | None = None
    goals: tuple[AgentGoal | Mapping[str, Any], ...] = ()
    client_tools: tuple[ClientToolSpec | Mapping[str, Any], ...] = ()

    def context(self, waiting_for: Sequence[str] = ()) -> dict[str, Any]:
        """What a resumed run needs again (goals live on the thread itself), and the client
        tool uses the thread waits for."""
        return {
            "waiting_for": list(waiting_for),
            "scope": None if self.scope is None else self.scope.model_dump(mode="json"),
            "viewing_context": None
            if self.viewing_context is None
            else self.viewing_context.model_dump(mode="json"),
            "client_tools": [
                (
                    s if isinstance(s, ClientToolSpec) else ClientToolSpec.model_validate(s)
                ).model_dump(mode="json")
                for s in self.client_tools
            ],
        }

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> RunRequest:
        scope, viewing = context.get("scope"), context.get("viewing_context")
        return cls(
            scope=None if scope is None else AnalysisScope.model_validate(scope),
            viewing_context=None
            if viewing is None
            else ClientViewingContext.model_validate(viewing),
            client_tools=tuple(
                ClientToolSpec.model_validate(s) for s in context.get("client_tools", ())
            ),
        )


def merged_scope(
    template: AnalysisScope | None, given: AnalysisScope | None
) -> AnalysisScope | None:
    """The run's scope: the authored one, with what the run was given winning field by field."""
    if template is None or given is None:
        return given if template is None else template
    return template.merge(given)


def refuse_while_waiting(store: ThreadStore, thread_id: str) -> None:
    """A thread waiting for client tool results takes those results before anything else."""
    try:
        waiting = store.get_run_context(thread_id).get("waiting_for")
    except ThreadNotFoundError:
        return
    if waiting:
        raise ClientToolError(
            f"thread {thread_id!r} waits for the results of client tool uses {waiting}; "
            "submit them with submit_tool_results before continuing it; nothing was recorded"
        )


def pending_uses(thread: AgentThreadRecord, names: Sequence[str]) -> dict[str, str]:
    """Client tool uses of ``thread`` without a result: tool_use_id -> tool name."""
    uses: dict[str, str] = {}
    answered: set[str] = set()
    for message in thread.messages:
        for block in message.content:
            if isinstance(block, AgentToolUseContent) and block.tool_name in names:
                uses[block.tool_use_id] = block.tool_name
            elif isinstance(block, AgentToolResultContent):
                answered.add(block.tool_use_id)
    return {use: name for use, name in uses.items() if use not in answered}


def _mismatch(thread_id: str, pending: Mapping[str, str], given: Mapping[str, Any]) -> None:
    unknown = sorted(set(given) - set(pending))
    missing = sorted(set(pending) - set(given))
    if unknown or missing:
        parts: list[str] = []
        if unknown:
            parts.append(f"unknown tool_use_id {', '.join(map(repr, unknown))}")
        if missing:
            parts.append(f"no result for {', '.join(map(repr, missing))}")
        waiting = ", ".join(f"{use!r} ({name})" for use, name in pending.items())
        raise ClientToolError(
            f"thread {thread_id!r} waits for results of {waiting}: {'; '.join(parts)}; "
            "nothing was recorded"
        )


def check_results(
    thread: AgentThreadRecord, request: RunRequest, results: Mapping[str, Any]
) -> None:
    """Results must answer exactly the uses the thread waits for (read before the run opens,
    so a wrong submission changes nothing, not even the thread's status)."""
    if thread.status is not AgentThreadStatus.CLIENT_TOOL_TURN:
        raise ClientToolError(
            f"thread {thread.thread_id!r} is not waiting for client tool results (its status "
            f"is {thread.status.value}); nothing was recorded"
        )
    names = [
        s.name if isinstance(s, ClientToolSpec) else str(s["name"]) for s in request.client_tools
    ]
    _mismatch(thread.thread_id, pending_uses(thread, names), results)
    for use, value in results.items():
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as error:  # UnicodeEncodeError is a ValueError
            raise ClientToolError(
                f"the result for {use!r} is not a JSON value ({error}); nothing was recorded"
            ) from None


def record_results(
    transcript: Transcript, offered: Sequence[Tool], results: Mapping[str, Any]
) -> tuple[Tool, ClientToolResult]:
    """Append the submitted result as the client tool's output; return the tool and the
    value its chain continues with. Checked again under the run's lease (another submission
    may have answered first)."""
    by_name = {tool.name: tool for tool in offered}
    messages, last_seq, thread_id = transcript.messages, transcript.last_seq, transcript.thread_id
    action = action_of(messages[-1]) if messages else None
    pending: dict[str, str] = {}
    if action is not None and action[0] in by_name and last_seq is not None:
        pending = {f"tu_{last_seq}": action[0]}
    if not pending:
        raise ClientToolError(
            f"thread {thread_id!r} is not waiting for client tool results; nothing was recorded"
        )
    _mismatch(str(thread_id), pending, results)
    ((use, name),) = pending.items()
    payload = results[use]
    transcript.append(
        Message(
            role=Role.TOOL,
            content=payload
            if isinstance(payload, str)
            else json.dumps(payload, ensure_ascii=False),
            caller=name,
            message_kind="tool_result",
        )
    )
    return by_name[name], ClientToolResult(tool_use_id=use, tool_name=name, payload=payload)
