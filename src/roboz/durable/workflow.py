"""The DBOS workflow of one durable turn, and how it asks the user.

A turn's workflow id is ``"<thread_id>/<turn>"`` (a ``/`` never occurs in a thread id, so the
ids of one thread share a prefix no other thread's have). Its steps, in order:

1. ``roboz.begin`` (a datasource transaction): create the thread if needed, mark it the
   agent's turn, read its rows as they are now, and write the turn's user message at the next
   sequence number. The recorded result is the conversation *as the turn began*: a resumed
   turn replays it instead of reading the thread again, where it would find its own rows.
2. The agent's run on that conversation under :class:`~roboz.durable.driver.DurableDriver`
   (LLM and tool steps, writes of the messages produced so far before each tool step).
3. ``roboz.write`` with the last messages and the thread's status (``user_turn``) again.

A run that fails writes what it produced and ends with :class:`TurnFailedError`, whose text
is the agent's error.

Events (the agent's event pipe) follow the steps: a turn's events go out only once one of its
steps has actually run in this process, so a resumed turn replays its recorded part silently
and its sinks see each event once, the dead worker's sinks having seen the part before its
last step. (The turn runs on a shallow copy of the agent, with its own pipe in front of the
agent's, so concurrent turns of one agent keep their run state apart.)
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from roboz.agent.drivers import drive
from roboz.agent.errors import AgentRunError
from roboz.agent.request import RunRequest
from roboz.agent.turn import Turn
from roboz.durable.conversation import DurableConversation, Row, Updated
from roboz.durable.driver import DurableDriver, ReplayGate
from roboz.durable.errors import DurableError
from roboz.durable.keys import in_step
from roboz.models import Message, Role, Stop, Str, StrImage
from roboz.runtime.events import EventPipe
from roboz.runtime.io import use_user_io
from roboz.threads._runs import StoredRunMessage
from roboz.threads.record import AgentThreadStatus

if TYPE_CHECKING:
    from roboz.agent.agent import Agent

WORKFLOW = "roboz.turn"
QUESTION_EVENT = "roboz.question"
ANSWER_TOPIC = "roboz.answer"


class TurnFailedError(DurableError):
    """The agent's run of a durable turn failed; the thread holds what it produced."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What a finished durable turn returns (``RunHandle.result()``)."""

    workflow_id: str
    thread_id: str
    output: Stop
    first_seq: int
    """Sequence number of the turn's user message."""
    last_seq: int
    """Sequence number of the turn's last message."""


@dataclass(frozen=True, slots=True)
class Question:
    """A question the turn waits on (``RunHandle.question()``): answer with ``answer``."""

    number: int
    text: str


@dataclass(frozen=True, slots=True)
class Started:
    """What ``roboz.begin`` records: the thread's rows when the turn began, the messages it
    wrote (the agent's initial messages on a new thread, then the user's) and the sequence
    number of the first of them."""

    rows: list[StoredRunMessage]
    new: list[Message]
    first_seq: int


class Host:
    """What the workflow needs from the process's DurableRuns (set by ``launch``)."""

    agents: dict[str, Agent]
    schema: str
    ask_timeout_s: float
    progress: bool
    begin: Callable[[str, str, list[Message], Message, Callable[[], None]], Started]
    write: Callable[
        [str, list[Row], list[Updated], AgentThreadStatus | None, Callable[[], None]], int
    ]


_host: Host | None = None


def set_host(host: Host | None) -> None:
    global _host
    _host = host


def _current_host() -> Host:
    if _host is None:
        raise DurableError("no DurableRuns is launched in this process")
    return _host


class DurableUserIO:
    """``ask_user`` in a durable turn: publish the question as a DBOS event, wait for the
    answer with DBOS ``recv`` (both recorded by DBOS, so a resumed turn neither asks again
    nor loses an answer already received)."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._asked = 0

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage | None:
        if in_step():
            raise DurableError(
                "a durable tool step cannot wait for the user; use the ask_user action"
            )
        number = self._asked
        self._asked += 1
        DBOS.set_event(QUESTION_EVENT, Question(number, prompt))
        reply = DBOS.recv(ANSWER_TOPIC, timeout_seconds=timeout or self._timeout_s)
        DBOS.set_event(QUESTION_EVENT, None)
        return None if reply is None else Str(value=str(reply))

    def notify(self, message: str) -> None:
        return None


@DBOS.workflow(name=WORKFLOW)
def run_turn(agent_name: str, text: str, thread_id: str) -> TurnResult:
    from roboz.agent.persistence import restore

    host = _current_host()
    agent = host.agents.get(agent_name)
    if agent is None:
        raise DurableError(
            f"this worker serves no agent {agent_name!r} (it serves: "
            f"{', '.join(sorted(host.agents)) or 'none'})"
        )
    workflow_id = DBOS.workflow_id or ""
    gate = ReplayGate(agent.event_pipe)
    user = Message(role=Role.USER, content=text)
    started = host.begin(thread_id, agent.name, list(agent.initial_messages), user, gate.open)
    history, seqs = restore(started.rows)
    new = started.new
    seqs += range(started.first_seq, started.first_seq + len(new))
    conversation = DurableConversation([*history, *new], seqs, _writer(host, thread_id, gate))
    inline = [agent.ask_user_tool] if agent.ask_user_tool is not None else []
    cancel = threading.Event()

    def factory(cancel: threading.Event) -> DurableDriver:
        return DurableDriver(cancel, conversation, inline, gate, progress=host.progress)

    runner = copy.copy(agent)
    runner.event_pipe = EventPipe([gate])

    turn = Turn(scope=agent.scope, thread_id=thread_id)
    try:
        with use_user_io(DurableUserIO(host.ask_timeout_s)):
            result: Any = drive(
                runner._run_turn(  # pyright: ignore[reportPrivateUsage]
                    conversation, factory, cancel, turn, RunRequest(), []
                )
            )
    except AgentRunError as error:
        conversation.flush(AgentThreadStatus.USER_TURN)
        raise TurnFailedError(f"agent {agent.name!r}: {error}") from None
    conversation.flush(turn.end_status)
    stop, _ = result
    last = conversation.last_seq
    first = started.first_seq + len(new) - 1
    return TurnResult(workflow_id, thread_id, stop, first, first if last is None else last)


def _writer(
    host: Host, thread_id: str, gate: ReplayGate
) -> Callable[[list[Row], list[Updated], AgentThreadStatus | None], None]:
    def write(rows: list[Row], updated: list[Updated], status: AgentThreadStatus | None) -> None:
        host.write(thread_id, rows, updated, status, gate.open)

    return write
