"""The driver of a durable turn: each LLM call and each tool call is a recorded DBOS step.

The agent scheduler (``roboz.agent.run``) reaches the outside world only through its driver,
so this driver alone makes a turn durable and the scheduler stays as it is. A step's result
is saved by DBOS before the scheduler sees it; a resumed turn replays from its start, gets
each recorded result back instead of running the step again, and so takes the same decisions
and appends the same messages in the same order (the workflow code between steps is the
scheduler, which is deterministic given its inputs).

- Every LLM call, every repair attempt included, is a step (``roboz.llm``).
- A tool call is a step (``roboz.tool.<name>``) whose outcome (output, a ``Retry``, or the
  failure's text) is what is recorded, so a replay raises the same Retry or failure. Inside
  it :func:`~roboz.durable.idempotency_key` gives ``"<workflow_id>:<step_id>"``.
- A tool declared ``pure`` (``@tool(pure=True)``) runs inline, costing no step: a replay just
  computes it again.
- The task tools (``TASK_TOOLS``) run inline as well: they only change the turn's task list,
  which a replay must rebuild (``DurableTurn``); the list reaches the thread with the next
  write.
- ``ask_user`` runs inline too: it waits with DBOS ``recv``, which DBOS records itself.
- A tool step first writes the messages appended since the last write to the thread
  (``DurableTranscript.flush``), so the thread shows the action a tool is running while it
  runs. That write is part of the step, not a step of its own (``roboz.durable.step_writes``:
  one transaction, idempotent, redone if the step is). The writes before
  ``ask_user`` and at the end of the turn are recorded steps. With ``progress=False``
  (``DurableRuns(progress=False)``) messages are written only then, one transaction per turn
  instead of one per tool call; readers then see a turn when it ends.

DBOS 3 records step results with its default serializer, pickle (base64 text in PostgreSQL):
a ``Completion`` (a dataclass), a tool's output (a pydantic value model) and the outcomes
below pickle as long as their classes are importable at module level in the worker, which is
where a resumed turn unpickles them (and the client, for the turn's result).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from roboz.agent.drivers import SyncDriver, drive
from roboz.durable.conversation import DurableTranscript
from roboz.durable.keys import step_key
from roboz.llm import Completion, EndpointLike, ProviderRecord
from roboz.llm.endpoint import DeltaCallback
from roboz.models import Empty, Message
from roboz.runtime.events import Event, EventPipe
from roboz.tools import Retry, Tool

LLM_STEP = "roboz.llm"
TOOL_STEP = "roboz.tool."


class StepFailedError(RuntimeError):
    """A recorded step failed; the text is the original error's type and message."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool step records: its output, or the Retry it raised, or why it failed."""

    output: Any = None
    runtime_ms: int = 0
    retry: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LLMOutcome:
    completion: Completion | None = None
    error: str | None = None


class ReplayGate:
    """The sink in front of an agent's event pipe during a durable turn: it passes events on
    once a step of the turn has run in this process (``open``), not while the turn replays
    what another execution of it recorded."""

    def __init__(self, pipe: EventPipe) -> None:
        self._pipe = pipe
        self.live = False

    def open(self) -> None:
        self.live = True

    @property
    def wants_deltas(self) -> bool:
        return self._pipe.wants_deltas

    def __call__(self, event: Event) -> None:
        if self.live:
            self._pipe.emit(event)


class DurableDriver(SyncDriver):
    calls_inline = False  # every tool call goes through call_tool: a step, or inline by rule

    def __init__(
        self,
        cancel: threading.Event,
        transcript: DurableTranscript,
        inline: Sequence[Tool],
        gate: ReplayGate,
        *,
        progress: bool = True,
        replayed: Sequence[Tool] = (),
    ) -> None:
        super().__init__(cancel)
        self._gate = gate
        self._transcript = transcript
        self._inline = {id(t) for t in inline}
        self._replayed = {id(t) for t in replayed}
        self._progress = progress

    async def call_tool(self, tool: Tool, value: Empty, messages: list[Message]) -> Any:
        if tool.pure or id(tool) in self._replayed:
            return await super().call_tool(tool, value, messages)
        if id(tool) in self._inline:  # ask_user: waits on DBOS recv, which DBOS records
            self._transcript.flush()  # the question is in the thread while the turn waits
            return await super().call_tool(tool, value, messages)
        outcome: ToolOutcome = DBOS.run_step(
            {"name": TOOL_STEP + tool.name}, self._tool_step, tool, value, messages
        )
        if outcome.retry is not None:
            raise Retry(outcome.retry)
        if outcome.error is not None:
            raise StepFailedError(outcome.error)
        self._transcript.note_runtime(outcome.runtime_ms)
        return outcome.output

    def _tool_step(self, tool: Tool, value: Empty, messages: list[Message]) -> ToolOutcome:
        self._gate.open()
        if self._progress:  # inside the step, where the write needs no record of its own
            self._transcript.flush()
        key = f"{DBOS.workflow_id}:{DBOS.step_id}"
        started = time.perf_counter()
        with step_key(key):
            try:
                output = drive(SyncDriver.call_tool(self, tool, value, messages))
            except Retry as retry:
                return ToolOutcome(retry=str(retry))
            except Exception as error:
                return ToolOutcome(error=f"{type(error).__name__}: {error}")
        return ToolOutcome(output, round((time.perf_counter() - started) * 1000))

    async def complete(
        self,
        endpoint: EndpointLike,
        records: Sequence[ProviderRecord],
        on_delta: DeltaCallback | None,
    ) -> Completion:
        outcome: LLMOutcome = DBOS.run_step(
            {"name": LLM_STEP}, self._llm_step, endpoint, records, on_delta
        )
        if outcome.completion is None:
            raise StepFailedError(outcome.error or "the LLM step recorded no completion")
        return outcome.completion

    def _llm_step(
        self,
        endpoint: EndpointLike,
        records: Sequence[ProviderRecord],
        on_delta: DeltaCallback | None,
    ) -> LLMOutcome:
        self._gate.open()
        try:
            return LLMOutcome(drive(SyncDriver.complete(self, endpoint, records, on_delta)))
        except Exception as error:
            return LLMOutcome(error=f"{type(error).__name__}: {error}")
