"""The Agent: a loop that calls tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, overload

from roboz.agent.client_tools import ClientToolResult, ClientToolTurn
from roboz.agent.errors import AgentConfigurationError
from roboz.agent.goals import GoalCheck
from roboz.agent.graph import ToolGraph
from roboz.agent.info import describe_agent
from roboz.agent.initial_prompt import INITIAL_PROMPT
from roboz.agent.mode import AgentMode
from roboz.agent.persistence import store_label
from roboz.agent.request import RunRequest
from roboz.agent.session import AgentRun, RunRegistry
from roboz.agent.spec import RunSpec
from roboz.agent.streaming import astream_run, stream_run
from roboz.agent.user import make_ask_user_tool
from roboz.llm import EndpointLike
from roboz.models import Message, Role, Stop
from roboz.runtime.events import Event, EventPipe, Sink
from roboz.runtime.io import UserIO
from roboz.runtime.usage import RunUsage
from roboz.threads import AgentGoal, AnalysisScope, ClientToolSpec, ClientViewingContext
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

    An Agent is a definition, immutable once built (``replace`` makes a changed copy), so
    one agent serves any number of concurrent runs (threads, tasks, workers); each run is
    an ``AgentRun`` of its own (``start``/``astart``; ``invoke`` and friends start one and
    wait for it).

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
        pipe = event_pipe if event_pipe is not None else EventPipe(list(event_sinks or []))
        # What replace() builds another agent from: every argument, the pipe resolved.
        self._arguments: dict[str, Any] = {
            "name": name,
            "system_prompt": system_prompt,
            "agent_endpoint": agent_endpoint,
            "tools": tools,
            "default_tools": default_tools,
            "mode": mode,
            "skills": skills,
            "auto_loaded_skills": auto_loaded_skills,
            "event_pipe": pipe,
            "user_io": user_io,
            "automatic_tool_prompt": automatic_tool_prompt,
            "initial_messages": initial_messages,
            "description": description,
            "max_steps": max_steps,
            "max_repairs": max_repairs,
            "store": store,
            "scope": scope,
            "goal_checks": goal_checks,
            "max_goal_prompts": max_goal_prompts,
            "initial_prompt": initial_prompt,
            "external_dependencies": external_dependencies,
        }
        self.name = name
        self.description = description
        self.system_prompt = system_prompt
        self.mode = AgentMode(mode)
        self.agent_endpoint = agent_endpoint
        # Tuples and a read-only mapping: a definition shared by runs cannot change under them.
        self.tools = tuple(flatten_tools(tools))
        self.default_tools = tuple(flatten_tools(default_tools))
        self.skills = tuple(skills)
        self.auto_loaded_skills = tuple(auto_loaded_skills)
        self.event_pipe = pipe
        self.user_io = user_io
        self.automatic_tool_prompt = automatic_tool_prompt
        self.initial_messages = tuple(
            m if isinstance(m, Message) else Message(role=Role.USER, content=m)
            for m in initial_messages
        )
        self.initial_prompt = initial_prompt
        """Asked through the UserIO for the first message of a run that has none (None: the
        run starts from what it is given)."""
        self.max_steps = max_steps
        self.max_repairs = max_repairs
        self.ask_user_tool = make_ask_user_tool() if self.mode is AgentMode.STEERABLE else None
        self.store = store
        """Thread store persisting every run (one row per message), or None for in memory."""
        self.scope = scope
        """The authored analysis scope; a run's ``scope=`` overrides it field by field."""
        self.goal_checks: Mapping[str, GoalCheck] = MappingProxyType(dict(goal_checks or {}))
        """The check of each goal type a turn may declare."""
        self.max_goal_prompts = max_goal_prompts
        """How often a turn's Stop may be sent back to the LLM because goals are unmet."""
        self.external_dependencies: tuple[ExternalDependency, ...] = tuple(external_dependencies)
        """Resources outside the process the agent's tools rely on (a deployment passes its
        own); ``show_agent_info`` lists them after the agent's endpoint."""
        self._runs = RunRegistry()
        self._validate()
        self._spec = RunSpec(
            name=self.name,
            system_prompt=self.system_prompt,
            mode=self.mode,
            endpoint=self.agent_endpoint,
            tools=self.tools,
            default_tools=self.default_tools,
            skills=self.skills,
            auto_loaded_skills=self.auto_loaded_skills,
            ask_user_tool=self.ask_user_tool,
            automatic_tool_prompt=self.automatic_tool_prompt,
            max_steps=self.max_steps,
            max_repairs=self.max_repairs,
            store=self.store,
            initial_messages=self.initial_messages,
            scope=self.scope,
            goal_checks=self.goal_checks,
            max_goal_prompts=self.max_goal_prompts,
            event_pipe=self.event_pipe,
            user_io=self.user_io,
            initial_prompt=self.initial_prompt,
        )
        self._frozen = True

    def __setattr__(self, name: str, value: object) -> None:
        # A definition shared by concurrent runs never changes under them.
        if getattr(self, "_frozen", False):
            raise AttributeError(
                f"Agent {self.name!r} is immutable (runs share it): use "
                f"agent.replace({name}=...) for an agent that differs"
            )
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> Agent:
        """Another agent like this one with ``changes`` (any ``Agent(...)`` argument; the
        event pipe is shared unless ``event_pipe`` or ``event_sinks`` is given)."""
        arguments = dict(self._arguments)
        if "event_sinks" in changes:
            arguments.pop("event_pipe")
        arguments.update(changes)
        return Agent(**arguments)

    # -- what the last finished run left (one run at a time; concurrent callers use the run) -

    @property
    def messages(self) -> list[Message]:
        """The conversation of the last run to finish (its own list; [] before any). With
        concurrent runs, use each run's ``AgentRun.messages`` or the returned conversation."""
        run = self._runs.last_finished
        return run.messages if run is not None else []

    @property
    def last_usage(self) -> RunUsage:
        """Token usage (and cost, where prices are known) of the last run to finish,
        successfully or not."""
        run = self._runs.last_finished
        return run.usage if run is not None else RunUsage()

    @property
    def thread_id(self) -> str | None:
        """The thread of the last persisted run to finish."""
        run = self._runs.last_finished
        return run.thread_id if run is not None else None

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
        names = [s.name for s in (*self.skills, *self.auto_loaded_skills)]
        if len(set(names)) != len(names):
            raise AgentConfigurationError(f"{label}: skill names must be unique: {names}")
        # Build the whole graph once, every skill included, so a bad chain fails now and not
        # in the middle of a run when a skill happens to be loaded.
        graph = ToolGraph()
        ask_user = [self.ask_user_tool] if self.ask_user_tool is not None else []
        # Tools chained to a client tool are checked when a run brings its client tools.
        graph.add([*self.tools, *self.default_tools, *ask_user], later_parents=ClientToolResult)
        for skill in (*self.skills, *self.auto_loaded_skills):
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
        with ``messages`` (if given) appended. Each call is a run of its own (``start``
        returns it while it runs), so any number may go at once on one agent.

        ``scope`` (merged over the agent's ``scope``) reaches every tool through
        ``current_scope()``; ``viewing_context`` is recorded on the user's message; ``goals``
        are this turn's goals (see ``goal_checks``). ``client_tools`` are offered to the LLM
        and run by the client: when the LLM calls one, the result is a ``ClientToolTurn``
        (the thread waits in CLIENT_TOOL_TURN) and ``submit_tool_results`` continues it.
        """
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return self.new_run(messages, thread_id, request).run_sync()

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
        sees CancelledError, as asyncio expects (``astart`` gives the run object, whose
        ``messages`` keep the conversation).
        """
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return await self.new_run(messages, thread_id, request).run_async()

    def submit_tool_results(
        self, thread_id: str, results: Mapping[str, Any]
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        """Answer the client tool uses thread ``thread_id`` waits for and continue its run.

        ``results`` maps each pending ``tool_use_id`` to what the tool returned (text or
        JSON). Unknown or missing ids raise ClientToolError and record nothing. The run goes
        on in this process (the thread's client tools, scope and viewing context are read
        from the store) and returns like ``invoke``.
        """
        return self._continuation(thread_id, results).run_sync()

    async def asubmit_tool_results(
        self, thread_id: str, results: Mapping[str, Any]
    ) -> tuple[Stop, list[Message]] | ClientToolTurn:
        """``submit_tool_results`` for async code."""
        return await self._continuation(thread_id, results).run_async()

    def _continuation(self, thread_id: str, results: Mapping[str, Any]) -> AgentRun:
        if self.store is None:
            raise AgentConfigurationError(
                f"agent {self.name!r}: submit_tool_results needs a store (Agent(..., store=...))"
            )
        return AgentRun(self._spec, thread_id=thread_id, results=results, registry=self._runs)

    def new_run(
        self,
        messages: list[Message] | None = None,
        thread_id: str | None = None,
        request: RunRequest | None = None,
        *,
        store: ThreadStore | None = None,
        event_pipe: EventPipe | None = None,
    ) -> AgentRun:
        """A run of this agent, not begun yet (``run_sync()``, ``await run_async()``,
        ``begin_in_thread()`` or ``begin_as_task()`` run it; ``start``/``invoke`` are the
        usual way). ``store`` stands in for the agent's own for this run (a nested agent's
        thread in its parent's store); ``event_pipe`` for the agent's pipe (a durable
        turn's replay gate in front of it)."""
        return AgentRun(
            self._spec,
            messages,
            thread_id=thread_id,
            request=request,
            store=store,
            registry=self._runs,
            event_pipe=event_pipe,
        )

    def start(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] | None = None,
    ) -> AgentRun:
        """Begin a run on a worker thread of its own and return it at once: ``run.result()``
        waits for what ``invoke`` returns, ``run.cancel()`` stops it (and no other run),
        ``run.thread_id`` names its thread from the start. Arguments as for ``invoke``."""
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return self.new_run(messages, thread_id, request).begin_in_thread()

    async def astart(
        self,
        messages: list[Message] | None = None,
        *,
        thread_id: str | None = None,
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] | None = None,
    ) -> AgentRun:
        """``start`` for async code: the run is a task of the running loop; ``await run``
        returns what ``ainvoke`` would."""
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return self.new_run(messages, thread_id, request).begin_as_task()

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
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return stream_run(self.new_run(messages, thread_id, request))

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
        request = RunRequest(scope, viewing_context, tuple(goals), tuple(client_tools or ()))
        return astream_run(self.new_run(messages, thread_id, request))

    def run_spec(self) -> RunSpec:
        """This agent's configuration, frozen, as every run sees it."""
        return self._spec

    def cancel(self) -> None:
        """Stop every run of this agent in progress (from another thread); to stop one run,
        use its own ``AgentRun.cancel()`` (``start``/``astart`` return it). Each run
        cancelled raises AgentCancelledError with its conversation so far."""
        for run in self._runs.active():
            run.cancel()

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
        thread = self.thread_id or "a new thread per invoke() unless thread_id= is given"
        return f"{store_label(self.store)}, thread {thread}"

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, mode={self.mode.value})"
