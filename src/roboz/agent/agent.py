"""The Agent: a loop that calls tools."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, overload

from roboz.agent.client_tools import (
    ClientToolResult,
    ClientToolTurn,
    ClientToolUse,
    client_tools,
)
from roboz.agent.current import use_agent
from roboz.agent.drivers import AsyncDriver, DriverFactory, SyncDriver, drive
from roboz.agent.errors import AgentConfigurationError, AgentRunError
from roboz.agent.goals import GoalCheck, GoalKeeper, declare
from roboz.agent.graph import ToolGraph
from roboz.agent.info import describe_agent
from roboz.agent.initial_prompt import INITIAL_PROMPT
from roboz.agent.mode import AgentMode
from roboz.agent.request import (
    RunRequest,
    check_results,
    merged_scope,
    record_results,
    refuse_while_waiting,
)
from roboz.agent.run import AgentRun
from roboz.agent.spec import RunSpec
from roboz.agent.streaming import astream_run, stream_run
from roboz.agent.turn import Turn, current_turn, sequence_numbers, turn_start, use_turn
from roboz.agent.user import NoInputUserIO, make_ask_user_tool
from roboz.llm import EndpointLike
from roboz.models import Message, Role, Stop
from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    AgentStarted,
    Event,
    EventPipe,
    Sink,
    use_pipe,
)
from roboz.runtime.io import UserIO, bound_user_io, current_user_io, use_user_io
from roboz.runtime.usage import RunUsage, recording_usage
from roboz.threads import (
    AgentGoal,
    AgentThreadStatus,
    AnalysisScope,
    ClientToolSpec,
    ClientViewingContext,
)
from roboz.tools import Factory, Skill, SkillFactory, Tool

if TYPE_CHECKING:
    from roboz.dependencies import ExternalDependency
    from roboz.threads import ThreadStore

ToolEntry = Tool | Sequence[Tool]


def flatten_tools(entries: Iterable[ToolEntry]) -> list[Tool]:
    """Tools and chains (sequences of tools) as one flat list, order kept."""
    flat: list[Tool] = []
    for entry in entries:
        if isinstance(entry, Tool):
            flat.append(entry)
        elif isinstance(entry, Sequence) and not isinstance(entry, str):
            flat.extend(flatten_tools(entry))
        else:
            raise AgentConfigurationError(
                f"{entry!r} is not a Tool or a chain of tools (call factories with their context)"
            )
    return flat


def _conversation(messages: object, initial: Sequence[Message]) -> list[Message]:
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


def _check_skill(label: str, where: str, entry: object) -> None:
    # Checked at run time for callers who do not type-check: a factory here would otherwise
    # fail later with an AttributeError that does not say what to do.
    if isinstance(entry, Factory | SkillFactory):
        raise AgentConfigurationError(
            f"{label}: {where} {entry!r} is a factory; call it with its context first "
            "(or build it in a Capability subclass's build())"
        )
    if not isinstance(entry, Skill):
        raise AgentConfigurationError(f"{label}: {where} {entry!r} is not a Skill")


class Agent:
    """Runs default tools in order, follows chains, and lets an LLM pick actions.

    ``tools`` are the agent's tools: unchained ones are offered to the LLM, chained ones run
    only after their parent. ``default_tools`` run in order whenever a chain ends; for
    STEERABLE and AUTONOMOUS agents ``prompt_llm`` is built internally as the last default.
    ``skills`` are offered on demand; ``auto_loaded_skills`` are loaded at start.
    ``scope`` is the authored analysis scope (a run's own ``scope=`` overrides it field by
    field); ``goal_checks`` decide the goals a turn declares, with ``max_goal_prompts``
    corrective re-prompts before the thread is GOALS_FAILED.
    """

    def __init__(
        self,
        name: str,
        system_prompt: str = "",
        *,
        agent_endpoint: EndpointLike | None = None,
        tools: Sequence[ToolEntry] = (),
        default_tools: Sequence[ToolEntry] = (),
        mode: AgentMode = AgentMode.STEERABLE,
        skills: Sequence[Skill] = (),
        auto_loaded_skills: Sequence[Skill] = (),
        event_pipe: EventPipe | None = None,
        event_sinks: Sequence[Sink] | None = None,
        user_io: UserIO | None = None,
        automatic_tool_prompt: bool = True,
        initial_messages: Sequence[Message | str] = (),
        initial_prompt: str | None = None,
        description: str = "",
        max_steps: int = 1000,
        max_repairs: int = 2,
        store: ThreadStore | None = None,
        scope: AnalysisScope | None = None,
        goal_checks: Mapping[str, GoalCheck] | None = None,
        max_goal_prompts: int = 2,
        external_dependencies: Sequence[ExternalDependency] = (),
    ) -> None:
        if event_pipe is not None and event_sinks is not None:
            raise AgentConfigurationError(
                f"agent {name!r}: pass either event_pipe or event_sinks, not both"
            )
        self.name = name
        self.description = description
        self.system_prompt = system_prompt
        self.mode = AgentMode(mode)
        self.agent_endpoint = agent_endpoint
        self.tools = flatten_tools(tools)
        self.default_tools = flatten_tools(default_tools)
        self.skills = list(skills)
        self.auto_loaded_skills = list(auto_loaded_skills)
        self.event_pipe = (
            event_pipe if event_pipe is not None else EventPipe(list(event_sinks or []))
        )
        self.user_io = user_io
        self.automatic_tool_prompt = automatic_tool_prompt
        self.initial_messages = [
            m if isinstance(m, Message) else Message(role=Role.USER, content=m)
            for m in initial_messages
        ]
        self.initial_prompt = initial_prompt
        """Asked through the UserIO for the first message of a run that has none (None: the
        run starts from what it is given)."""
        self.max_steps = max_steps
        self.max_repairs = max_repairs
        self.ask_user_tool = make_ask_user_tool() if self.mode is AgentMode.STEERABLE else None
        self.messages: list[Message] = []
        self.store = store
        """Thread store persisting every run (one row per message), or None for in memory."""
        self.thread_id: str | None = None
        """The thread of the last persisted run."""
        self.scope = scope
        """The authored analysis scope; a run's ``scope=`` overrides it field by field."""
        self.goal_checks: dict[str, GoalCheck] = dict(goal_checks or {})
        """The check of each goal type a turn may declare."""
        self.max_goal_prompts = max_goal_prompts
        """How often a turn's Stop may be sent back to the LLM because goals are unmet."""
        self.external_dependencies: tuple[ExternalDependency, ...] = tuple(external_dependencies)
        """Resources outside the process the agent's tools rely on (a deployment passes its
        own); ``show_agent_info`` lists them after the agent's endpoint."""
        self.last_usage: RunUsage = RunUsage()
        """Token usage (and cost, where prices are known) of the last run, finished or not."""
        self._cancel = threading.Event()
        self._driver: SyncDriver | AsyncDriver | None = None
        self._validate()

    @property
    def llm_driven(self) -> bool:
        return self.mode is not AgentMode.DETERMINISTIC

    def _validate(self) -> None:
        label = f"agent {self.name!r}"
        if self.store is not None and self.store.read_only:
            path = getattr(self.store, "path", "")
            raise AgentConfigurationError(
                f"{label}: the thread store {path} is opened read-only; a run must write its thread"
            )
        if self.llm_driven and self.agent_endpoint is None:
            raise AgentConfigurationError(
                f"{label}: mode {self.mode.value} asks an LLM, so it needs agent_endpoint"
            )
        if not self.llm_driven and not self.default_tools:
            raise AgentConfigurationError(
                f"{label}: a deterministic agent needs at least one default tool"
            )
        for default in self.default_tools:
            if default.is_chained:
                raise AgentConfigurationError(
                    f"{label}: default tool {default.name!r} declares chained_to; defaults "
                    "cannot be chained to another tool"
                )
            try:
                default.input_type()
            except ValueError:
                raise AgentConfigurationError(
                    f"{label}: default tool {default.name!r} takes "
                    f"{default.input_type.__name__}, which has required fields; defaults run "
                    "with no input"
                ) from None
        for field, entries in (
            ("skills", self.skills),
            ("auto_loaded_skills", self.auto_loaded_skills),
        ):
            for index, entry in enumerate(entries):
                _check_skill(label, f"{field}[{index}]", entry)
        if self.initial_prompt is not None:
            if not isinstance(self.initial_prompt, str) or not self.initial_prompt.strip():
                raise AgentConfigurationError(
                    f"{label}: initial_prompt is the question asking the user for the first "
                    f"message; give non-empty text (or None), got {self.initial_prompt!r}"
                )
            if self.mode is AgentMode.AUTONOMOUS:
                raise AgentConfigurationError(
                    f"{label}: initial_prompt asks the user, which an autonomous agent cannot; "
                    "give initial_messages instead, or mode=AgentMode.STEERABLE"
                )
        names = [s.name for s in self.skills + self.auto_loaded_skills]
        if len(set(names)) != len(names):
            raise AgentConfigurationError(f"{label}: skill names must be unique: {names}")
        # Build the whole graph once, every skill included, so a bad chain fails now and not
        # in the middle of a run when a skill happens to be loaded.
        graph = ToolGraph()
        ask_user = [self.ask_user_tool] if self.ask_user_tool is not None else []
        # Tools chained to a client tool are checked when a run brings its client tools.
        graph.add([*self.tools, *self.default_tools, *ask_user], later_parents=ClientToolResult)
        for skill in self.skills + self.auto_loaded_skills:
            for item in skill.with_prerequisites():
                graph.add(item.tools, origin=f"skill {item.name!r}")
        reserved = {"prompt_llm", INITIAL_PROMPT} | {s.name for s in self.skills}
        clashes = reserved & set(graph.tools)
        if clashes:
            raise AgentConfigurationError(
                f"{label}: tool names {sorted(clashes)} clash with prompt_llm, "
                f"{INITIAL_PROMPT} or a skill name"
            )

    @overload
    def invoke(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: None = None,
    ) -> tuple[Stop, list[Message]]: ...

    @overload
    def invoke(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]],
    ) -> tuple[Stop, list[Message]] | ClientToolTurn: ...

    def invoke(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] | None = None,
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        """Run until a tool returns Stop. Returns the Stop and the full conversation.

        Pass ``messages`` to continue an earlier conversation; otherwise the run starts from
        ``initial_messages``. On error an AgentRunError carries the conversation so far.

        With a ``store``, the run is persisted as thread ``thread_id`` (a new id when None):
        a new thread starts as above, an existing one continues from its stored conversation
        with ``messages`` (if given) appended. ``thread_id`` names it afterwards.

        ``scope`` (merged over the agent's ``scope``) reaches every tool through
        ``current_scope()``; ``viewing_context`` is recorded on the user's message; ``goals``
        are this turn's goals (see ``goal_checks``). ``client_tools`` are offered to the LLM
        and run by the client: when the LLM calls one, the result is a ``ClientToolTurn``
        (the thread waits in CLIENT_TOOL_TURN) and ``submit_tool_results`` continues it.
        """
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return drive(self._run(messages, SyncDriver, threading.Event(), thread_id, request))

    @overload
    async def ainvoke(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: None = None,
    ) -> tuple[Stop, list[Message]]: ...

    @overload
    async def ainvoke(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]],
    ) -> tuple[Stop, list[Message]] | ClientToolTurn: ...

    async def ainvoke(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] | None = None,
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        """``invoke`` for async code: the same run, on the caller's event loop.

        Async tools and ``acomplete`` endpoints are awaited; sync tools and sync-only
        endpoints run on worker threads. Cancelling the awaiting task cancels the LLM call in
        flight and ends the run as ``cancel()`` does (AgentFailed is emitted); the task then
        sees CancelledError, as asyncio expects, and ``agent.messages`` keeps the conversation.
        """
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return await self._run(messages, AsyncDriver, threading.Event(), thread_id, request)

    def submit_tool_results(
        self, thread_id: str, results: Mapping[str, Any]
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        """Answer the client tool uses thread ``thread_id`` waits for and continue its run.

        ``results`` maps each pending ``tool_use_id`` to what the tool returned (text or
        JSON). Unknown or missing ids raise ClientToolError and record nothing. The run goes
        on in this process (the thread's client tools, scope and viewing context are read
        from the store) and returns like ``invoke``.
        """
        return drive(self._submit(thread_id, results, SyncDriver, threading.Event()))

    async def asubmit_tool_results(
        self, thread_id: str, results: Mapping[str, Any]
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        """``submit_tool_results`` for async code."""
        return await self._submit(thread_id, results, AsyncDriver, threading.Event())

    async def _submit(
        self,
        thread_id: str,
        results: Mapping[str, Any],
        driver: DriverFactory,
        cancel: threading.Event,
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        if self.store is None:
            raise AgentConfigurationError(
                f"agent {self.name!r}: submit_tool_results needs a store (Agent(..., store=...))"
            )
        request = RunRequest.from_context(self.store.get_run_context(thread_id))
        check_results(self.store.get_thread(thread_id), request, results)
        return await self._run(None, driver, cancel, thread_id, request, dict(results))

    def stream(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] | None = None,
    ) -> Iterator[Event]:
        """Run on a worker thread and yield its events as they happen (see ``astream``)."""
        cancel = threading.Event()
        self._cancel = cancel
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return stream_run(
            self.event_pipe,
            lambda cancel: drive(self._run(messages, SyncDriver, cancel, thread_id, request)),
            cancel,
        )

    def astream(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] | None = None,
    ) -> AsyncIterator[Event]:
        """Run on the caller's loop and yield its events as they happen: tools started and
        finished, LLM deltas (raw, and LLMProseDelta per text field of the action), user
        prompts, and last AgentFinished (with the result: the Stop, or the ClientToolUse the
        thread waits for) or AgentFailed (then the error is raised). Use
        ``contextlib.aclosing`` to leave early: the run is cancelled."""
        cancel = threading.Event()
        self._cancel = cancel
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return astream_run(
            self.event_pipe,
            lambda cancel: self._run(messages, AsyncDriver, cancel, thread_id, request),
            cancel,
        )

    async def _run(
        self,
        messages: list[Message] | None,
        driver: DriverFactory,
        cancel: threading.Event,
        thread_id: str | None = None,
        request: RunRequest | None = None,
        results: dict[str, Any] | None = None,
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        request = request or RunRequest()
        offered = client_tools(request.client_tools)
        scope = merged_scope(self.scope, request.scope)
        if self.store is None:
            if thread_id is not None:
                raise AgentConfigurationError(
                    f"agent {self.name!r}: thread_id needs a store (Agent(..., store=...))"
                )
            if offered:
                raise AgentConfigurationError(
                    f"agent {self.name!r}: client tools need a store: the run waits for their "
                    "results in its thread (Agent(..., store=...))"
                )
            conversation = _conversation(messages, self.initial_messages)
            turn = Turn(scope=scope, viewing_context=request.viewing_context)
            return await self._run_turn(conversation, driver, cancel, turn, request, offered)
        from roboz.agent.persistence import persisted_conversation

        store = self.store
        if results is None and thread_id is not None:
            refuse_while_waiting(store, thread_id)
        with persisted_conversation(
            self, messages, thread_id, request.viewing_context
        ) as conversation:
            thread = conversation.thread_id
            if request.client_tools or request.scope or request.viewing_context:
                store.set_run_context(thread, request.context())
            tasks, goals = store.get_tasks_and_goals(thread)
            turn = Turn(
                scope=scope,
                viewing_context=request.viewing_context,
                store=store,
                thread_id=thread,
                tasks=tasks,
                goals=goals,
            )
            resume = None
            if results is not None:
                resume = record_results(conversation, offered, results)
                store.set_run_context(thread, request.context())  # no longer waiting
            result = await self._run_turn(
                conversation, driver, cancel, turn, request, offered, resume
            )
            if isinstance(result, ClientToolTurn):
                waiting = [use.tool_use_id for use in result.pending]
                store.set_run_context(thread, request.context(waiting))
                conversation.end_status = AgentThreadStatus.CLIENT_TOOL_TURN
            else:
                conversation.end_status = turn.end_status
            return result

    async def _run_turn(
        self,
        conversation: list[Message],
        driver: DriverFactory,
        cancel: threading.Event,
        turn: Turn,
        request: RunRequest,
        offered: list[Tool],
        resume: tuple[Tool, ClientToolResult] | None = None,
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        seqs = sequence_numbers(conversation)
        turn.turn_seq = seqs[turn_start(conversation)] if seqs else 0
        for goal in request.goals:
            declare(turn, goal, self.goal_checks)
        budget = self.max_goal_prompts if self.llm_driven else 0
        keeper = GoalKeeper(turn, self.goal_checks, budget, self.name)
        with use_turn(turn):
            result = await self._run_on(
                conversation, driver, cancel, offered=offered, goals=keeper, resume=resume
            )
        if isinstance(result, ClientToolUse):
            return ClientToolTurn(turn.thread_id, [result], conversation)
        return result, conversation

    async def _run_on(
        self,
        conversation: list[Message],
        driver: DriverFactory,
        cancel: threading.Event,
        *,
        offered: Sequence[Tool] = (),
        goals: GoalKeeper | None = None,
        resume: tuple[Tool, ClientToolResult] | None = None,
    ) -> Stop | ClientToolUse:
        self.messages = conversation
        self._cancel = cancel
        # Without its own user_io the agent uses the binding in force (a host's adapter).
        user_io = self.user_io if self.user_io is not None else bound_user_io()
        if self.mode is AgentMode.AUTONOMOUS:
            user_io = NoInputUserIO(user_io or current_user_io())
        with use_pipe(self.event_pipe), use_user_io(user_io), use_agent(self):
            self.event_pipe.emit(AgentStarted(agent=self.name, mode=self.mode.value))
            self._driver = run_driver = driver(cancel)
            run = AgentRun(
                self.run_spec(),
                conversation,
                cancel,
                run_driver,
                turn=current_turn(),
                client_tools=offered,
                goals=goals,
                resume=resume,
            )
            try:
                with recording_usage(run.recorder):
                    stop = await run.run()
            except AgentRunError as error:
                self.last_usage = usage = run.usage
                self.event_pipe.emit(AgentFailed(agent=self.name, error=str(error), usage=usage))
                raise
            except asyncio.CancelledError:
                cancel.set()
                self.last_usage = usage = run.usage
                reason = str(run.cancelled_error())
                self.event_pipe.emit(AgentFailed(agent=self.name, error=reason, usage=usage))
                raise
            self.last_usage = usage = run.usage
            self.event_pipe.emit(
                AgentFinished(
                    agent=self.name,
                    output=stop,
                    steps=run.steps,
                    llm_calls=run.llm_calls,
                    usage=usage,
                )
            )
        return stop

    def run_spec(self) -> RunSpec:
        """This agent's configuration, frozen, as the next run will see it."""
        return RunSpec(
            name=self.name,
            system_prompt=self.system_prompt,
            mode=self.mode,
            endpoint=self.agent_endpoint,
            tools=tuple(self.tools),
            default_tools=tuple(self.default_tools),
            skills=tuple(self.skills),
            auto_loaded_skills=tuple(self.auto_loaded_skills),
            ask_user_tool=self.ask_user_tool,
            automatic_tool_prompt=self.automatic_tool_prompt,
            max_steps=self.max_steps,
            max_repairs=self.max_repairs,
            initial_prompt=self.initial_prompt,
        )

    def cancel(self) -> None:
        """Stop the run in progress (from another thread): no further step starts, and an
        endpoint that supports cancellation abandons the call it is waiting on. The run
        raises AgentCancelledError with the conversation so far."""
        self._cancel.set()
        if self._driver is not None:
            self._driver.interrupt()

    def show_agent_info(self, *, print_it: bool = True) -> str:
        """The complete configuration, system prompt included; printed and returned."""
        text = describe_agent(
            self.run_spec(),
            description=self.description,
            sinks=self.event_pipe.sinks,
            user_io=self.user_io,
            initial_messages=self.initial_messages,
            persistence=self._persistence(),
            dependencies=self.external_dependencies,
        )
        if print_it:
            print(text)
        return text

    def _persistence(self) -> str:
        if self.store is None:
            return "in memory; invoke() returns the conversation"
        from roboz.agent.persistence import store_label

        thread = self.thread_id or "a new thread per invoke() unless thread_id= is given"
        return f"{store_label(self.store)}, thread {thread}"

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, mode={self.mode.value})"
