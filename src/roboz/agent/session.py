"""One run of an agent, as an object of its own: ``AgentRun``.

An ``Agent`` is a definition shared by any number of concurrent runs; everything one run
changes lives here: its conversation, cancel signal, driver, usage, thread id, turn and its
own event pipe (a ``RunPipe`` over the agent's, so the run's streams hear only this run and
every event carries ``run_id``). ``Agent.invoke``/``ainvoke`` make one and
wait for it; ``Agent.start``/``astart`` hand it back while it runs.

The run is given its three ports explicitly: the driver (sync, async or a durable one),
the transcript (where its messages go: ``roboz.agent.transcript``; in memory, a thread of
the store, or a durable turn's) and the run context its tools reach
(``roboz.agent.context``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import uuid
from collections.abc import Generator, Mapping
from typing import Any, cast

from roboz.agent.client_tools import ClientToolResult, ClientToolTurn, ClientToolUse, client_tools
from roboz.agent.context import RunContext, use_run
from roboz.agent.drivers import AsyncDriver, Driver, DriverFactory, SyncDriver, drive
from roboz.agent.errors import AgentCancelledError, AgentConfigurationError, AgentRunError
from roboz.agent.goals import GoalKeeper, declare
from roboz.agent.mode import AgentMode
from roboz.agent.persistence import check_thread_id, store_transcript
from roboz.agent.request import RunRequest, merged_scope, record_results, refuse_while_waiting
from roboz.agent.run import Scheduler, run_graph
from roboz.agent.spec import RunSpec
from roboz.agent.transcript import MemoryTranscript, Transcript
from roboz.agent.turn import Turn, turn_start
from roboz.agent.user import NoInputUserIO
from roboz.models import Message, Stop
from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    AgentStarted,
    EventPipe,
    RunPipe,
    use_pipe,
)
from roboz.runtime.io import bound_user_io, current_user_io, use_user_io
from roboz.runtime.usage import RunUsage, recording_usage
from roboz.threads import AgentThreadStatus, ThreadStore
from roboz.threads.record import new_thread_id
from roboz.tools import Tool

RunResult = tuple[Stop, list[Message]] | ClientToolTurn
"""What a run ends with: its Stop and conversation, or the client tool turn it waits in."""


def _conversation(messages: object, initial: tuple[Message, ...]) -> list[Message]:
    """The list a run appends to: the caller's own list (kept, never replaced), else a copy
    of the initial messages. Anything else is refused here, not deep inside the run."""
    if messages is None:
        return list(initial)
    if not isinstance(messages, list):  # checked at run time for callers who do not type-check
        raise TypeError(
            f"invoke(messages=...) takes the list of Message objects to continue (it is "
            f"extended in place), got {type(messages).__name__}; start a conversation from "
            "text with Agent(initial_messages=[...])"
        )
    conversation = cast("list[Message]", messages)
    for index, message in enumerate(conversation):
        if not isinstance(message, Message):
            raise TypeError(
                f"invoke(messages=...): item {index} is {type(message).__name__}, not a "
                "Message; wrap text as Message(role='user', content=...) or pass it as "
                "Agent(initial_messages=[...])"
            )
    return conversation


class RunRegistry:
    """The runs of one agent in progress, and the last one to finish (thread-safe).

    Kept by the Agent only so that ``Agent.cancel()`` reaches every run and the
    compatibility views (``agent.messages``, ``last_usage``, ``thread_id``) name one
    finished run; no run reads it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, AgentRun] = {}
        self.last_finished: AgentRun | None = None

    def started(self, run: AgentRun) -> None:
        with self._lock:
            self._active[run.run_id] = run

    def finished(self, run: AgentRun) -> None:
        with self._lock:
            self._active.pop(run.run_id, None)
            self.last_finished = run

    def active(self) -> list[AgentRun]:
        with self._lock:
            return list(self._active.values())


class AgentRun:
    """One run of an agent: ``cancel()``, ``messages``, ``usage``, ``thread_id``,
    ``run_id``, and its outcome through ``result()`` (or ``await run``).

    Made by ``Agent.start``/``astart`` (or inside ``invoke``/``ainvoke``); the thread id is
    known from the start (a new one when the agent has a store and none was given).
    """

    def __init__(
        self,
        spec: RunSpec,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        request: RunRequest | None = None,
        results: Mapping[str, Any] | None = None,
        store: ThreadStore | None = None,
        registry: RunRegistry | None = None,
        event_pipe: EventPipe | None = None,
    ) -> None:
        self.spec = spec
        self.run_id = uuid.uuid4().hex
        self.request = request or RunRequest()
        self.store = store if store is not None else spec.store
        if self.store is None and thread_id is not None:
            raise AgentConfigurationError(
                f"agent {spec.name!r}: thread_id needs a store (Agent(..., store=...))"
            )
        if self.store is not None:
            thread_id = (
                new_thread_id() if thread_id is None else check_thread_id(thread_id, self.store)
            )
        self.thread_id = thread_id
        """The run's thread (None in memory)."""
        self.pipe = RunPipe(event_pipe or spec.event_pipe, self.run_id)
        """This run's events (subscribe to hear only them); they go on to the agent's pipe."""
        self._given = messages
        self._results = dict(results) if results is not None else None
        self._cancel = threading.Event()
        self._driver: Driver | None = None
        self._messages: list[Message] = messages if isinstance(messages, list) else []
        self._scheduler: Scheduler | None = None
        self._usage = RunUsage()
        self._registry = registry
        self._outcome: concurrent.futures.Future[RunResult] | None = None
        self._task: asyncio.Future[RunResult] | None = None
        self.turn: Turn | None = None
        """The run's turn (scope, viewing context, tasks, goals) once it started."""

    # -- what a caller sees --------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The run's conversation as it grows (the same list the result returns)."""
        return self._messages

    @property
    def usage(self) -> RunUsage:
        """The LLM calls of this run so far (its own and its tools'; nested runs keep
        theirs)."""
        scheduler = self._scheduler
        return scheduler.usage if scheduler is not None else self._usage

    @property
    def cancel_event(self) -> threading.Event:
        """Set once the run is asked to stop (the event its driver and endpoint watch)."""
        return self._cancel

    def cancel(self) -> None:
        """Stop this run (from any thread): no further step starts, and an endpoint that
        supports cancellation abandons the call it is waiting on. The run raises
        AgentCancelledError with the conversation so far; other runs go on."""
        self._cancel.set()
        driver = self._driver
        if driver is not None:
            driver.interrupt()

    def done(self) -> bool:
        """True once a started run ended (with a result or an error)."""
        if self._task is not None:
            return self._task.done()
        return self._outcome is not None and self._outcome.done()

    def result(self, timeout: float | None = None) -> RunResult:
        """Wait for a run ``Agent.start`` began and return what ``invoke`` would have, or
        raise its error; for a run ``Agent.astart`` began (await it), once it is done."""
        if self._task is not None:
            if not self._task.done():
                raise RuntimeError("the run is still going: await it on its loop")
            return self._task.result()
        if self._outcome is None:
            raise RuntimeError("result() is for runs begun with Agent.start or Agent.astart")
        return self._outcome.result(timeout)

    def __await__(self) -> Generator[Any, None, RunResult]:
        """``await run``: the result of a run ``Agent.astart`` (or ``start``) began."""
        if self._task is not None:
            return self._task.__await__()
        if self._outcome is None:
            raise RuntimeError("await a run begun with Agent.start or Agent.astart")
        return asyncio.wrap_future(self._outcome).__await__()

    def __repr__(self) -> str:
        return f"AgentRun(agent={self.spec.name!r}, run_id={self.run_id!r})"

    # -- beginning -----------------------------------------------------------------------------

    def begin_in_thread(self) -> AgentRun:
        """Run to the end on a worker thread of its own (``Agent.start``)."""
        outcome: concurrent.futures.Future[RunResult] = concurrent.futures.Future()
        self._outcome = outcome

        def work() -> None:
            try:
                outcome.set_result(self.run_sync())
            except BaseException as error:  # handed to result(); the thread ends quietly
                outcome.set_exception(error)

        context = contextvars.copy_context()
        name = f"roboz-run-{self.spec.name}"
        threading.Thread(target=context.run, args=(work,), name=name, daemon=True).start()
        return self

    def begin_as_task(self) -> AgentRun:
        """Run to the end as a task of the running loop (``Agent.astart``)."""
        self._task = asyncio.ensure_future(self.run_async())
        return self

    def run_sync(self) -> RunResult:
        """Run to the end on this thread (``invoke``)."""
        return drive(self.execute(SyncDriver))

    async def run_async(self) -> RunResult:
        """Run to the end on the caller's loop (``ainvoke``)."""
        return await self.execute(AsyncDriver)

    # -- the run -------------------------------------------------------------------------------

    async def execute(self, driver: DriverFactory) -> RunResult:
        registry = self._registry
        if registry is not None:
            registry.started(self)
        try:
            if self._results is not None:
                return await self._continue(driver, self._results)
            return await self._open(driver)
        finally:
            if registry is not None:
                registry.finished(self)

    async def _continue(self, driver: DriverFactory, results: dict[str, Any]) -> RunResult:
        """``submit_tool_results``: the thread's client tools, scope and viewing context are
        read back from the store."""
        from roboz.agent.request import check_results

        store, thread_id = self.store, self.thread_id
        if store is None or thread_id is None:
            raise AgentConfigurationError(
                f"agent {self.spec.name!r}: submit_tool_results needs a store "
                "(Agent(..., store=...))"
            )
        self.request = RunRequest.from_context(store.get_run_context(thread_id))
        check_results(store.get_thread(thread_id), self.request, results)
        return await self._open(driver)

    async def _open(self, driver: DriverFactory) -> RunResult:
        spec, request, results = self.spec, self.request, self._results
        offered = client_tools(request.client_tools)
        run_graph(spec, offered)  # a clash is refused before the thread is touched
        scope = merged_scope(spec.scope, request.scope)
        store, thread_id = self.store, self.thread_id
        if store is None or thread_id is None:
            if offered:
                raise AgentConfigurationError(
                    f"agent {spec.name!r}: client tools need a store: the run waits for their "
                    "results in its thread (Agent(..., store=...))"
                )
            in_memory = MemoryTranscript(_conversation(self._given, spec.initial_messages))
            turn = Turn(scope=scope, viewing_context=request.viewing_context)
            return await self.run_turn(in_memory, driver, turn)
        if results is None:
            refuse_while_waiting(store, thread_id)
        with store_transcript(
            spec, store, self._given, thread_id, request.viewing_context
        ) as transcript:
            if request.client_tools or request.scope or request.viewing_context:
                store.set_run_context(thread_id, request.context())
            tasks, goals = store.get_tasks_and_goals(thread_id)
            turn = Turn(
                scope=scope,
                viewing_context=request.viewing_context,
                store=store,
                thread_id=thread_id,
                tasks=tasks,
                goals=goals,
            )
            resume = None
            if results is not None:
                resume = record_results(transcript, offered, results)
                store.set_run_context(thread_id, request.context())  # no longer waiting
            result = await self.run_turn(transcript, driver, turn, resume)
            if isinstance(result, ClientToolTurn):
                waiting = [use.tool_use_id for use in result.pending]
                store.set_run_context(thread_id, request.context(waiting))
                transcript.end_status = AgentThreadStatus.CLIENT_TOOL_TURN
            else:
                transcript.end_status = turn.end_status
            return result

    async def run_turn(
        self,
        transcript: Transcript,
        driver: DriverFactory,
        turn: Turn,
        resume: tuple[Tool, ClientToolResult] | None = None,
    ) -> RunResult:
        """One turn of this run on the ports it is given: its ``transcript`` (where its
        messages go), its ``driver`` and its ``turn`` (the thread's scope, tasks and goals).
        ``invoke`` runs it once the thread is open; a host that keeps the thread itself (a
        durable workflow, on its own transcript and driver) calls it directly. ``resume`` is
        the client tool whose submitted result the transcript just recorded
        (``roboz.agent.request.record_results``)."""
        spec = self.spec
        conversation = transcript.messages
        self._messages = conversation
        self.turn = turn
        turn.turn_seq = transcript.seq(turn_start(conversation)) if conversation else 0
        for goal in self.request.goals:
            declare(turn, goal, spec.goal_checks)
        budget = spec.max_goal_prompts if spec.llm_driven else 0
        keeper = GoalKeeper(turn, spec.goal_checks, budget, spec.name)
        offered = client_tools(self.request.client_tools)
        result = await self._run_on(transcript, driver, turn, offered, keeper, resume)
        if isinstance(result, ClientToolUse):
            return ClientToolTurn(turn.thread_id, [result], conversation)
        return result, conversation

    async def _run_on(
        self,
        transcript: Transcript,
        driver: DriverFactory,
        turn: Turn,
        offered: list[Tool],
        goals: GoalKeeper,
        resume: tuple[Tool, ClientToolResult] | None,
    ) -> Stop | ClientToolUse:
        spec, cancel, pipe = self.spec, self._cancel, self.pipe
        # Without its own user_io the agent uses the binding in force (a host's adapter).
        user_io = spec.user_io if spec.user_io is not None else bound_user_io()
        if spec.mode is AgentMode.AUTONOMOUS:
            user_io = NoInputUserIO(user_io or current_user_io())
        context = RunContext(
            run_id=self.run_id,
            agent=spec.name,
            endpoint=spec.endpoint,
            store=turn.store,
            thread_id=turn.thread_id,
            turn=turn,
            cancel=cancel,
            goal_checks=spec.goal_checks,
            user_io=user_io,
            pipe=pipe,
            transcript=transcript,
        )
        with use_pipe(pipe), use_user_io(user_io), use_run(context):
            pipe.emit(AgentStarted(agent=spec.name, mode=spec.mode.value))
            self._driver = run_driver = driver(cancel)
            if cancel.is_set():  # cancelled before its driver existed
                run_driver.interrupt()
            scheduler = Scheduler(
                spec,
                transcript,
                cancel,
                run_driver,
                turn=turn,
                client_tools=offered,
                goals=goals,
                resume=resume,
                pipe=pipe,
            )
            self._scheduler = scheduler
            try:
                with recording_usage(scheduler.recorder):
                    stop = await scheduler.run()
            except AgentRunError as error:
                cancelled = isinstance(error, AgentCancelledError)
                pipe.emit(
                    AgentFailed(
                        agent=spec.name,
                        error=str(error),
                        usage=scheduler.usage,
                        cancelled=cancelled,
                    )
                )
                raise
            except asyncio.CancelledError:
                cancel.set()
                reason = str(scheduler.cancelled_error())
                pipe.emit(
                    AgentFailed(
                        agent=spec.name, error=reason, usage=scheduler.usage, cancelled=True
                    )
                )
                raise
            pipe.emit(
                AgentFinished(
                    agent=spec.name,
                    output=stop,
                    steps=scheduler.steps,
                    llm_calls=scheduler.llm_calls,
                    usage=scheduler.usage,
                )
            )
        return stop
