"""Records a RoboZ agent run into a thread and turns it into events for user interfaces.

:class:`ThreadRecorder` is an EventPipe sink. What it writes:

- each ``prompt_llm`` step becomes one ASSISTANT message: GENERATING while the reply streams
  in, then COMPLETED with a tool-use block for the action the model chose appended. Its text
  is the reply's prose, not its JSON: every LLMProseDelta (the rationale, the text arguments
  such as the stop value, decoded as they arrive) appends one text block, so a client is
  sent each fragment once; fields are separated by a blank line (``ProseText``). The raw
  reply is kept on the tool-use block (``raw_request``);
- tool runs become blocks of one ROBOTO message per step of the loop: a tool-result block
  (payload, runtime_ms, status) for every tool. Tools the scheduler ran without the model
  asking (defaults and chained tools) also get a tool-use block there, minted by the
  recorder, so every result has its call;
- a reply rejected and asked again replaces the draft at the same index
  (``regenerate_turn``), so clients see a reset rather than two drafts spliced together;
- a failed run ends with an error block on the message being written when it broke off
  (the reply being generated, else that step's tool results), which is marked FAILED
  (CANCELLED, error code ``cancelled``, when the run was cancelled); a tool that was running
  gets a result with status "error".

Each step is also translated into :data:`AgentEvent` objects, kept in ``events`` and passed to
``on_event``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, cast

from roboz.models import Empty, Invoke
from roboz.models.values import payload_json
from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    AgentStarted,
    Event,
    LLMProseDelta,
    LLMReplied,
    LLMRequested,
    SkillLoaded,
    ToolFinished,
    ToolStarted,
)
from roboz.runtime.prose import ProseText, reply_prose
from roboz.threads._runs import CANCELLED
from roboz.threads.backend import ThreadStore
from roboz.threads.content import (
    AgentClientContextEntry,
    AgentErrorContent,
    AgentTextContent,
    AgentToolResultContent,
    AgentToolUseContent,
)
from roboz.threads.context import ClientViewingContext
from roboz.threads.event import (
    AgentErrorEvent,
    AgentEvent,
    AgentStartTextEvent,
    AgentTextDeltaEvent,
    AgentTextEndEvent,
    tool_result_event,
    tool_use_event,
)
from roboz.threads.record import AgentMessage, AgentMessageStatus, AgentRole, AgentThreadStatus

PROMPT_LLM = "prompt_llm"


def tool_payload(output: Any) -> str | dict[str, Any] | list[Any] | None:
    """A tool's output as JSON-ready data: the value the LLM sees for typed outputs."""
    if output is None or isinstance(output, str | dict | list):
        # A tool's dict or list output is JSON-ready data the tool built itself.
        return cast("str | dict[str, Any] | list[Any] | None", output)
    if isinstance(output, Empty):
        data: Any = json.loads(payload_json(output))
        return cast("dict[str, Any]", data) if isinstance(data, dict) else {"value": data}
    return str(output)


class _Draft:
    """A message the recorder is still writing; it only ever grows by appended blocks."""

    def __init__(self, seq: int) -> None:
        self.seq = seq


class ThreadRecorder:
    """EventPipe sink writing one agent's run into ``thread_id`` of ``store``.

    Only events of ``agent`` are recorded; when None, the agent of the first AgentStarted.
    """

    def __init__(
        self,
        store: ThreadStore,
        thread_id: str,
        *,
        agent: str | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.agent = agent
        self.on_event = on_event
        self.events: list[AgentEvent] = []
        self._reply: _Draft | None = None
        self._reply_text = ""  # the prose written into the reply so far
        self._reply_raw = ""  # the reply as the model sent it
        self._prose = ProseText()
        self._results: _Draft | None = None
        self._in_prompt = False
        self._pending: AgentToolUseContent | None = None
        self._running: dict[str, str] = {}

    # -- public helpers -----------------------------------------------------------------------

    def add_user_message(self, text: str, *, context: ClientViewingContext | None = None) -> int:
        """Append the user's message, with their viewing context as a block when given."""
        blocks: list[Any] = [AgentTextContent(text=text)]
        if context is not None:
            blocks.append(AgentClientContextEntry(context=context))
        message = AgentMessage(
            role=AgentRole.USER, content=blocks, status=AgentMessageStatus.COMPLETED
        )
        return self.store.append_message(self.thread_id, message)

    # -- the sink -----------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        if isinstance(event, AgentStarted) and self.agent is None:
            self.agent = event.agent
        if event.agent is not None and event.agent != self.agent:
            return
        match event:
            case AgentStarted():
                self.store.set_status(self.thread_id, AgentThreadStatus.ROBOTO_TURN)
            case ToolStarted(tool=tool) if tool == PROMPT_LLM:
                self._in_prompt = True
            case LLMRequested() if self._in_prompt:
                self._open_reply()
            case LLMProseDelta(field=field, text=text) if (
                self._in_prompt and self._reply is not None
            ):
                self._stream(self._prose.add(field, text))
            case LLMReplied(text=text) if self._in_prompt and self._reply is not None:
                self._end_text(text)
            case ToolFinished(tool=tool, output=output) if tool == PROMPT_LLM:
                self._in_prompt = False
                if isinstance(output, Invoke):
                    self._complete_reply(output)
            case ToolStarted(tool=tool, trigger=trigger):
                self._start_tool(tool, trigger)
            case ToolFinished(tool=tool, output=output, duration_s=duration):
                self._finish_tool(tool, tool_payload(output), duration, "success")
            case SkillLoaded(skill=skill):
                if self._pending is not None and self._pending.tool_name == skill:
                    self._start_tool(skill, "invoked")
                    self._finish_tool(skill, {"skill": skill, "loaded": True}, 0.0, "success")
            case AgentFinished():
                self._close_results()
                self.store.set_status(self.thread_id, AgentThreadStatus.USER_TURN)
            case AgentFailed(error=error, cancelled=cancelled):
                self._fail(error, cancelled)
            case _:
                pass  # any other event leaves the thread as it is

    # -- steps --------------------------------------------------------------------------------

    def _emit(self, event: AgentEvent) -> None:
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def _open_reply(self) -> None:
        self._close_results()
        draft = AgentMessage(
            role=AgentRole.ASSISTANT, content=[], status=AgentMessageStatus.GENERATING
        )
        if self._reply is not None:
            # Asked again after a rejected reply: the new attempt replaces the draft in place.
            if self._reply_text:
                self._emit(AgentTextEndEvent())
            self.store.regenerate_turn(self.thread_id, self._reply.seq, draft)
            seq = self._reply.seq
        else:
            seq = self.store.append_message(self.thread_id, draft)
        self._reply = _Draft(seq)
        self._reply_text = self._reply_raw = ""
        self._prose = ProseText()

    def _stream(self, text: str) -> None:
        assert self._reply is not None
        if not text:
            return
        if not self._reply_text:
            self._emit(AgentStartTextEvent())
        self._reply_text += text
        self._append(self._reply, [AgentTextContent(text=text)])
        self._emit(AgentTextDeltaEvent(text=text))

    def _end_text(self, reply: str) -> None:
        assert self._reply is not None
        self._reply_raw = reply
        text = reply_prose(reply)
        if self._reply_text:
            self._emit(AgentTextEndEvent())
        if text == self._reply_text:
            return
        if not self._reply_text:
            self._append(self._reply, [AgentTextContent(text=text)] if text else [])
        else:
            # The final text is not what was streamed: clients must not keep the fragments.
            draft = AgentMessage(
                role=AgentRole.ASSISTANT,
                content=[AgentTextContent(text=text)] if text else [],
                status=AgentMessageStatus.GENERATING,
            )
            self.store.regenerate_turn(self.thread_id, self._reply.seq, draft)
        self._reply_text = text

    def _complete_reply(self, invoke: Invoke) -> None:
        if self._reply is None:
            return
        try:
            parsed = json.loads(self._reply_raw)
        except json.JSONDecodeError:
            parsed = None
        arguments = tool_payload(invoke.input)
        use = AgentToolUseContent(
            tool_use_id=f"tu_{uuid.uuid4().hex[:16]}",
            tool_name=invoke.action,
            input=arguments if isinstance(arguments, dict) else None,
            raw_request=cast("dict[str, Any]", parsed) if isinstance(parsed, dict) else None,
        )
        self._append(self._reply, [use], AgentMessageStatus.COMPLETED)
        self._reply = None
        self._pending = use
        self._emit(tool_use_event(use))

    def _results_draft(self) -> _Draft:
        if self._results is None:
            empty = AgentMessage(
                role=AgentRole.ROBOTO, content=[], status=AgentMessageStatus.GENERATING
            )
            seq = self.store.append_message(self.thread_id, empty)
            self._results = _Draft(seq)
        return self._results

    def _start_tool(self, tool: str, trigger: str) -> None:
        pending = self._pending
        if trigger == "invoked" and pending is not None and pending.tool_name == tool:
            self._running[tool] = pending.tool_use_id
            self._pending = None
            return
        use = AgentToolUseContent(tool_use_id=f"tu_{uuid.uuid4().hex[:16]}", tool_name=tool)
        self._running[tool] = use.tool_use_id
        self._append(self._results_draft(), [use])
        self._emit(tool_use_event(use))

    def _finish_tool(self, tool: str, payload: Any, duration_s: float, status: str) -> None:
        tool_use_id = self._running.pop(tool, None)
        if tool_use_id is None:
            return
        result = AgentToolResultContent(
            tool_use_id=tool_use_id,
            tool_name=tool,
            runtime_ms=round(duration_s * 1000),
            status=status,
            payload=payload,
        )
        self._append(self._results_draft(), [result])
        self._emit(tool_result_event(result))

    def _close_results(self) -> None:
        if self._results is not None:
            self._append(self._results, [], AgentMessageStatus.COMPLETED)
            self._results = None

    def _fail(self, error: str, cancelled: bool = False) -> None:
        for tool in list(self._running):
            self._finish_tool(tool, error, 0.0, "error")
        # A cancel is the seed's CANCELLED (code "cancelled"), as a persisted run records it.
        code = CANCELLED if cancelled else None
        ended = AgentMessageStatus.CANCELLED if cancelled else AgentMessageStatus.FAILED
        failure = AgentErrorContent(error_message=error, error_code=code)
        # The error goes on the message being written when the run broke off: the reply
        # being generated, else the tool results of the step that failed.
        if self._reply is not None:
            self._close_results()
        draft = self._reply or self._results
        if draft is not None:
            self._append(draft, [failure], ended)
        else:
            self.store.append_message(
                self.thread_id,
                AgentMessage(role=AgentRole.ROBOTO, content=[failure], status=ended),
            )
        self._reply = self._results = None
        self._emit(AgentErrorEvent(error_message=error, error_code=code))
        self.store.set_status(self.thread_id, AgentThreadStatus.USER_TURN)

    def _append(
        self,
        draft: _Draft,
        blocks: list[Any],
        status: AgentMessageStatus = AgentMessageStatus.GENERATING,
    ) -> None:
        self.store.append_blocks(self.thread_id, draft.seq, blocks, status)
