"""A thread's deltas as AG-UI events, and a thread's messages as AG-UI messages.

The two agree by construction: a client that starts from ``agui_messages(before)`` (sent as
MESSAGES_SNAPSHOT) and applies the events :class:`RunTranslator` makes from the deltas
after it holds ``agui_messages(after)``. The mapping, message by message (ids are the
thread's sequence numbers, ``msg-N``):

- a user's message: a user message with its text (client context blocks are not text);
- an agent's message: an assistant message whose content is its prose (the text blocks,
  streamed as TEXT_MESSAGE_CONTENT) and whose tool calls are its tool uses
  (TOOL_CALL_START/ARGS/END, the arguments as JSON);
- a system (roboto) message: its tool uses as an assistant message of its own (a tool the
  scheduler ran itself), and each tool result as a tool message ``msg-N-TOOLUSEID``
  (TOOL_CALL_RESULT; text as it is, JSON as JSON text).

Error blocks end the run (RUN_ERROR, or RUN_FINISHED with a cancelled outcome) rather than
become messages; goals and tasks are the run's state (STATE_SNAPSHOT, then STATE_DELTA as
JSON patches); a rewound reply is a new MESSAGES_SNAPSHOT.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from ag_ui.core.events import RunFinishedCancelledOutcome, RunFinishedSuccessOutcome

from roboz.threads import (
    AgentErrorContent,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadDelta,
    AgentThreadRecord,
    AgentThreadStatus,
    AgentToolResultContent,
    AgentToolUseContent,
)

CANCELLED_CODES = frozenset({"cancelled", "canceled"})


def message_id(seq: int) -> str:
    return f"msg-{seq}"


def result_id(seq: int, tool_use_id: str) -> str:
    return f"msg-{seq}-{tool_use_id}"


def result_text(block: AgentToolResultContent) -> str:
    """A tool result's payload as a tool message's content: text as it is, else JSON."""
    payload = block.resolve_payload()
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, ensure_ascii=False)


def _arguments(block: AgentToolUseContent) -> str:
    return json.dumps(block.input or {}, ensure_ascii=False)


def _text(message: AgentMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, AgentTextContent))


def _calls(message: AgentMessage) -> list[ToolCall]:
    return [
        ToolCall(id=b.tool_use_id, function=FunctionCall(name=b.tool_name, arguments=_arguments(b)))
        for b in message.content
        if isinstance(b, AgentToolUseContent)
    ]


def agui_messages(record: AgentThreadRecord) -> list[Message]:
    """The thread's messages as an AG-UI client holds them (see the module's mapping)."""
    found: list[Message] = []
    for seq, message in enumerate(record.messages):
        mid = message_id(seq)
        if message.role is AgentRole.USER:
            found.append(UserMessage(id=mid, content=_text(message)))
            continue
        calls = _calls(message)
        if message.role is AgentRole.ASSISTANT:
            text = _text(message)
            if text or calls:
                found.append(
                    AssistantMessage(id=mid, content=text or None, tool_calls=calls or None)
                )
            continue
        if calls:
            found.append(AssistantMessage(id=mid, tool_calls=calls))
        for block in message.content:
            if isinstance(block, AgentToolResultContent):
                found.append(
                    ToolMessage(
                        id=result_id(seq, block.tool_use_id),
                        tool_call_id=block.tool_use_id,
                        content=result_text(block),
                    )
                )
    return found


def agui_state(record: AgentThreadRecord) -> dict[str, Any]:
    """The run's shared state: the thread's goals and tasks (JSON, as the thread API sends)."""
    return {
        "goals": [g.model_dump(mode="json") for g in record.goals or []],
        "tasks": [t.model_dump(mode="json") for t in record.tasks or []],
    }


def pending_tool_uses(record: AgentThreadRecord) -> list[str]:
    """The tool uses of the thread's last agent message that have no result yet."""
    answered = {
        b.tool_use_id
        for m in record.messages
        for b in m.content
        if isinstance(b, AgentToolResultContent)
    }
    for message in reversed(record.messages):
        if message.role is AgentRole.ASSISTANT:
            return [
                b.tool_use_id
                for b in message.content
                if isinstance(b, AgentToolUseContent) and b.tool_use_id not in answered
            ]
    return []


class RunTranslator:
    """Turns the deltas of one run into AG-UI events, holding the thread as it grows."""

    def __init__(self, before: AgentThreadRecord) -> None:
        self.record = before
        self._state = agui_state(before)
        self._open_text: str | None = None
        self._first_seq = len(before.messages)

    def start(self) -> list[BaseEvent]:
        """What the client holds when the run starts (it replaces the client's copy)."""
        return [
            MessagesSnapshotEvent(messages=agui_messages(self.record)),
            StateSnapshotEvent(snapshot=self._state),
        ]

    def apply(self, delta: AgentThreadDelta) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if delta.reset_from_message_sequence_num is not None:
            # A rewound reply: the client replaces what it holds (nothing may be left open).
            self._close_text(events)
            self.record = self.record.apply_delta(delta)
            events.append(MessagesSnapshotEvent(messages=agui_messages(self.record)))
        else:
            held = len(self.record.messages)
            for seq in sorted(delta.messages_by_idx):
                self._message(events, seq, delta.messages_by_idx[seq], new=seq >= held)
            self.record = self.record.apply_delta(delta)
        if delta.tasks is not None or delta.goals is not None:
            state = agui_state(self.record)
            patch: list[Any] = [
                {"op": "replace", "path": f"/{key}", "value": state[key]}
                for key in ("goals", "tasks")
                if state[key] != self._state[key]
            ]
            self._state = state
            if patch:
                events.append(StateDeltaEvent(delta=patch))
        return events

    def finish(self, thread_id: str, run_id: str) -> list[BaseEvent]:
        """The run's end, read from the thread once its turn is over."""
        events: list[BaseEvent] = []
        self._close_text(events)
        error = self._turn_error()
        if error is not None and (error.error_code or "") not in CANCELLED_CODES:
            events.append(RunErrorEvent(message=error.error_message, code=error.error_code))
            return events
        status = self.record.status
        if error is not None or self._turn_cancelled():
            outcome: Any = RunFinishedCancelledOutcome()
        else:
            pending = pending_tool_uses(self.record)
            waiting = status is AgentThreadStatus.CLIENT_TOOL_TURN and pending
            outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending if waiting else None)
        events.append(
            RunFinishedEvent(
                thread_id=thread_id,
                run_id=run_id,
                outcome=outcome,
                result={"status": status.value},
            )
        )
        return events

    # -- one message -------------------------------------------------------------------------

    def _message(
        self, events: list[BaseEvent], seq: int, message: AgentMessage, *, new: bool
    ) -> None:
        mid = message_id(seq)
        if self._open_text is not None and self._open_text != mid:
            self._close_text(events)
        if message.role is AgentRole.USER:
            text = _text(message)
            if new:
                events.append(TextMessageStartEvent(message_id=mid, role="user"))
                if text:
                    events.append(TextMessageContentEvent(message_id=mid, delta=text))
                events.append(TextMessageEndEvent(message_id=mid))
            return
        for block in message.content:
            if isinstance(block, AgentTextContent):
                if message.role is AgentRole.ASSISTANT and block.text:
                    if self._open_text is None:
                        self._open_text = mid
                        events.append(TextMessageStartEvent(message_id=mid, role="assistant"))
                    events.append(TextMessageContentEvent(message_id=mid, delta=block.text))
            elif isinstance(block, AgentToolUseContent):
                self._close_text(events)
                events.append(
                    ToolCallStartEvent(
                        tool_call_id=block.tool_use_id,
                        tool_call_name=block.tool_name,
                        parent_message_id=mid,
                    )
                )
                events.append(
                    ToolCallArgsEvent(tool_call_id=block.tool_use_id, delta=_arguments(block))
                )
                events.append(ToolCallEndEvent(tool_call_id=block.tool_use_id))
            elif isinstance(block, AgentToolResultContent):
                self._close_text(events)
                events.append(
                    ToolCallResultEvent(
                        message_id=result_id(seq, block.tool_use_id),
                        tool_call_id=block.tool_use_id,
                        content=result_text(block),
                        role="tool",
                    )
                )
        if message.status.is_terminal():
            self._close_text(events)

    def _close_text(self, events: list[BaseEvent]) -> None:
        if self._open_text is not None:
            events.append(TextMessageEndEvent(message_id=self._open_text))
            self._open_text = None

    def _turn_messages(self) -> list[AgentMessage]:
        return self.record.messages[self._first_seq :]

    def _turn_error(self) -> AgentErrorContent | None:
        for message in reversed(self._turn_messages()):
            for block in reversed(message.content):
                if isinstance(block, AgentErrorContent):
                    return block
        return None

    def _turn_cancelled(self) -> bool:
        return any(m.status is AgentMessageStatus.CANCELLED for m in self._turn_messages())
