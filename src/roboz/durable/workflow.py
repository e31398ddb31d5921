"""The DBOS workflow of one durable turn, and how it asks the user.

A turn's workflow id is ``"<thread_id>/<turn>"`` (a ``/`` never occurs in a thread id, so the
ids of one thread share a prefix no other thread's have). Its steps, in order:

1. ``roboz.begin`` (a datasource transaction): create the thread if needed, mark it the
   agent's turn, read its rows as they are now, and write the turn's user message at the next
   sequence number. The recorded result is the conversation *as the turn began*: a resumed
   turn replays it instead of reading the thread again, where it would find its own rows.
2. The agent's run on that conversation under :class:`~roboz.durable.driver.DurableDriver`
   (LLM and tool steps; each tool step first writes the messages produced so far).
3. ``roboz.write`` with the last messages and the thread's status (``user_turn``) again.

A run that fails writes what it produced and ends with :class:`TurnFailedError`, whose text
is the agent's error.

Events (the agent's event pipe) follow the steps: a turn's events go out only once one of its
steps has actually run in this process, so a resumed turn replays its recorded part silently
and its sinks see each event once, the dead worker's sinks having seen the part before its
last step. (The turn is a run of its own, ``Agent.new_run`` with the gate in front of the
agent's pipe, so concurrent turns of one agent keep their run state apart.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbos import DBOS
from pydantic import TypeAdapter

from roboz.agent.client_tools import ClientToolTurn, ClientToolUse
from roboz.agent.client_tools import client_tools as offer_client_tools
from roboz.agent.drivers import drive
from roboz.agent.errors import AgentRunError
from roboz.agent.goals import as_goal
from roboz.agent.request import RunRequest, record_results
from roboz.agent.run import run_graph
from roboz.agent.tasks import TASK_TOOLS
from roboz.agent.turn import Turn
from roboz.durable.cancel import cancelled
from roboz.durable.conversation import DurableTranscript, Row, Updated
from roboz.durable.driver import DurableDriver, ReplayGate
from roboz.durable.errors import DurableError
from roboz.durable.keys import in_step
from roboz.models import Message, Role, Stop, Str, StrImage
from roboz.runtime.events import EventPipe
from roboz.runtime.io import use_user_io
from roboz.threads import AgentTask, AgentThreadGoalRecord
from roboz.threads._rows import dump_list
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
    output: Stop | None
    """The turn's Stop; None when it waits for client tool results (``pending``)."""
    first_seq: int
    """Sequence number of the turn's user message (a continuation after client tool results:
    of the result it recorded)."""
    last_seq: int
    """Sequence number of the turn's last message."""
    pending: tuple[ClientToolUse, ...] = ()
    """The client tool uses the thread waits for: run them, then
    ``DurableClient.submit_tool_results``."""


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
    tasks: str = "[]"
    """The thread's task list when the turn began (JSON, as stored)."""
    goals: str = "[]"
    """The thread's goals when the turn began (JSON, as stored)."""
    context: str = "{}"
    """The thread's run context when the turn began (JSON: client tools, scope, ...)."""


Snapshot = tuple[str | None, str | None, str | None]
"""What a write sets besides messages: the task list, the goals and the run context (JSON),
None: unchanged."""


@dataclass(frozen=True, slots=True)
class CancelSignal:
    """Sent to a turn waiting on the user when it is cancelled: DBOS's ``recv`` does not
    notice a cancellation, so this wakes it to stop."""


class Host:
    """What the workflow needs from the process's DurableRuns (set by ``launch``)."""

    agents: dict[str, Agent]
    schema: str
    ask_timeout_s: float
    progress: bool
    begin: Callable[
        [str, str, str, list[Message], Message | None, list[str] | None, Callable[[], None]],
        Started,
    ]
    write: Callable[
        [
            str,
            str,
            list[Row],
            list[Updated],
            AgentThreadStatus | None,
            Snapshot,
            Callable[[], None],
        ],
        int,
    ]


_host: Host | None = None
_TASKS = TypeAdapter(list[AgentTask])
_GOALS = TypeAdapter(list[AgentThreadGoalRecord])


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
        if isinstance(reply, CancelSignal):
            raise cancelled(DBOS.workflow_id or "")
        DBOS.set_event(QUESTION_EVENT, None)
        return None if reply is None else Str(value=str(reply))

    def notify(self, message: str) -> None:
        return None


class DurableTurn(Turn):
    """A durable turn's tasks and goals: a change is kept until the turn's next thread write,
    which sets the thread's snapshot in the same transaction as the messages (so exactly
    once, and a replay, which returns the recorded write, sets nothing).

    The task tools run inline (no step), so a replay rebuilds the same list; a tool that
    changes tasks or goals from inside a step would not be replayed, so it is refused.
    """

    tasks_changed: bool = False
    goals_changed: bool = False
    context: str | None = None
    """A run context to write with the next write (the client tool uses the thread waits for)."""

    def _refuse_in_step(self) -> None:
        if in_step():
            raise DurableError(
                "a durable tool step cannot change the turn's tasks or goals (a replay would "
                "not repeat it): declare the tool @tool(pure=True)"
            )

    def save_tasks(self) -> None:
        self._refuse_in_step()
        self.tasks.sort(key=lambda task: task.position)
        self.tasks_changed = True

    def save_goals(self) -> None:
        self._refuse_in_step()
        self.goals_changed = True

    def take_snapshot(self) -> Snapshot:
        tasks = dump_list(self.tasks) if self.tasks_changed else None
        goals = None
        if self.goals_changed:
            ordered = sorted(self.goals, key=lambda g: (g.message_sequence_num, g.created))
            goals = dump_list(ordered)
        self.tasks_changed = self.goals_changed = False
        context, self.context = self.context, None
        return tasks, goals, context


@DBOS.workflow(name=WORKFLOW)
def run_turn(
    agent_name: str,
    text: str,
    thread_id: str,
    goals: list[dict[str, Any]] | None = None,
    client_tools: list[dict[str, Any]] | None = None,
    results: dict[str, Any] | None = None,
) -> TurnResult:
    """One turn: the user's ``text``, or (``results`` given) the continuation of a turn that
    waits for client tool results, with those results."""
    from roboz.agent.rows import restore

    host = _current_host()
    agent = host.agents.get(agent_name)
    if agent is None:
        raise DurableError(
            f"this worker serves no agent {agent_name!r} (it serves: "
            f"{', '.join(sorted(host.agents)) or 'none'})"
        )
    asked = [as_goal(goal) for goal in goals or ()]
    unknown = sorted({g.goal_type for g in asked} - set(agent.goal_checks))
    if unknown:  # refused before the thread is touched
        raise DurableError(
            f"agent {agent.name!r} has no check for goal type(s) {', '.join(unknown)} "
            f"(known: {sorted(agent.goal_checks)})"
        )
    request = RunRequest(goals=tuple(asked), client_tools=tuple(client_tools or ()))
    # A spec it cannot enforce, or one clashing with the agent's tools: refused here.
    run_graph(agent.run_spec(), offer_client_tools(request.client_tools))
    workflow_id = DBOS.workflow_id or ""
    gate = ReplayGate(agent.event_pipe)
    user = None if results is not None else Message(role=Role.USER, content=text)
    answered = None if results is None else sorted(results)
    initial = list(agent.initial_messages)
    started = host.begin(workflow_id, thread_id, agent.name, initial, user, answered, gate.open)
    history, seqs = restore(started.rows)
    new = started.new
    seqs += range(started.first_seq, started.first_seq + len(new))
    turn = DurableTurn(
        scope=agent.scope,
        thread_id=thread_id,
        tasks=_TASKS.validate_json(started.tasks),
        goals=_GOALS.validate_json(started.goals),
    )
    writer = _writer(host, workflow_id, thread_id, gate, turn)
    transcript = DurableTranscript([*history, *new], seqs, writer, thread_id)
    if results is not None:  # the client tools the waiting turn offered
        request = RunRequest.from_context(json.loads(started.context))
    offered = offer_client_tools(request.client_tools)
    resume = None
    if results is not None:
        resume = record_results(transcript, offered, results)
    inline = [agent.ask_user_tool] if agent.ask_user_tool is not None else []

    def factory(cancel: threading.Event) -> DurableDriver:
        return DurableDriver(
            cancel, transcript, inline, gate, progress=host.progress, replayed=TASK_TOOLS
        )

    # A run of its own, its events through the replay gate (which passes them on to the
    # agent's pipe once the turn is live), on the turn's own ports: its transcript, driver
    # and turn.
    run = agent.new_run(request=request, event_pipe=EventPipe([gate]))
    try:
        with use_user_io(DurableUserIO(host.ask_timeout_s)):
            result = drive(run.run_turn(transcript, factory, turn, resume))
    except AgentRunError as error:
        transcript.flush(AgentThreadStatus.USER_TURN)
        raise TurnFailedError(f"agent {agent.name!r}: {error}") from None
    first = started.first_seq + len(new) - 1 if new else started.first_seq
    if isinstance(result, ClientToolTurn):
        pending = tuple(result.pending)
        turn.context = json.dumps(request.context([use.tool_use_id for use in pending]))
        transcript.flush(AgentThreadStatus.CLIENT_TOOL_TURN)
        last = transcript.last_seq
        return TurnResult(
            workflow_id, thread_id, None, first, first if last is None else last, pending
        )
    transcript.flush(turn.end_status)
    stop, _ = result
    last = transcript.last_seq
    return TurnResult(workflow_id, thread_id, stop, first, first if last is None else last)


def _writer(
    host: Host, workflow_id: str, thread_id: str, gate: ReplayGate, turn: DurableTurn
) -> Callable[[list[Row], list[Updated], AgentThreadStatus | None], None]:
    def write(rows: list[Row], updated: list[Updated], status: AgentThreadStatus | None) -> None:
        snapshot = turn.take_snapshot()
        host.write(workflow_id, thread_id, rows, updated, status, snapshot, gate.open)

    return write
