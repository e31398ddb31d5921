"""One run of an agent: the scheduler loop over defaults, chains and invocations.

Written once, as coroutines; ``drivers.py`` runs it for ``invoke`` (without an event loop)
and for ``ainvoke`` (on the caller's loop). Everything outside (tools, the endpoint) is
reached through the driver.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from roboz.agent.client_tools import ClientToolResult, ClientToolUse
from roboz.agent.drivers import Driver, SyncDriver
from roboz.agent.errors import (
    AgentCancelledError,
    AgentConfigurationError,
    AgentReplyError,
    AgentRunError,
    ChainConflictError,
    MaxStepsExceededError,
    ToolExecutionError,
)
from roboz.agent.goals import GoalKeeper
from roboz.agent.graph import ChainConflict, ToolGraph
from roboz.agent.initial_prompt import (
    INITIAL_PROMPT,
    first_message,
    make_initial_prompt_tool,
    needs_first_message,
)
from roboz.agent.prompting import action_json, parse_action, render_system_prompt
from roboz.agent.spec import RunSpec
from roboz.agent.transcript import Transcript
from roboz.agent.turn import Turn
from roboz.agent.view import ConversationView
from roboz.llm import LLMReplyError, ProviderRecord
from roboz.llm.completion import REPLY_ERRORS, RepairBudget, reason_of, record_usage
from roboz.models import Empty, Invoke, Message, Role, Stop, Str
from roboz.models.messages import trusted_message
from roboz.models.values import RawText, images_of, payload_json
from roboz.runtime.events import (
    EventPipe,
    LLMDelta,
    LLMProseDelta,
    LLMReplied,
    LLMReplyRejected,
    LLMRequested,
    SkillLoaded,
    ToolFinished,
    ToolStarted,
    emit,
)
from roboz.runtime.prose import ProseStream
from roboz.runtime.usage import RunUsage, UsageRecorder
from roboz.tools import Retry, Skill, Tool

PROMPT_LLM = "prompt_llm"
_ENDS = (Stop, ClientToolUse)  # what ends a chain (a tuple: isinstance on a union costs more)


def run_graph(spec: RunSpec, client_tools: Sequence[Tool] = ()) -> ToolGraph:
    """The tools of one run: the agent's and the client tools the run offers.

    A tool chained to a client tool this run does not offer stays in the graph and never
    runs (its parent cannot be called): clients offer different client tools, and a turn
    without one is a turn in which that chain does not apply, not a broken agent. A client
    tool whose name is taken, or that feeds a chained tool the wrong type, is refused here,
    before the run touches its thread (``AgentConfigurationError``)."""
    graph = ToolGraph()
    taken = {PROMPT_LLM, INITIAL_PROMPT}
    for skill in (*spec.skills, *spec.auto_loaded_skills):
        for part in skill.with_prerequisites():  # a skill loaded later must not clash either
            taken.update({part.name, *(t.name for t in part.tools)})
    if spec.ask_user_tool is not None:
        taken.add(spec.ask_user_tool.name)
    for offered in client_tools:
        if offered.name in taken:
            raise AgentConfigurationError(
                f"client tool {offered.name!r}: agent {spec.name!r} has a tool or skill of that "
                "name; name the client tool differently"
            )
    graph.add(
        [*client_tools, *spec.tools, *spec.default_tools],
        origin="client tools and agent tools",
        later_parents=ClientToolResult,
    )
    return graph


class Scheduler:
    """The loop of one run over its transcript: loaded skills, counters, the graph.

    It reads the conversation as ``self.messages`` and adds to it only through
    ``self.transcript.append`` (or a tool's own appends, handed over by ``adopt``), which is
    where a persisted run's messages are committed.
    """

    def __init__(
        self,
        spec: RunSpec,
        transcript: Transcript,
        cancel: threading.Event | None = None,
        driver: Driver | None = None,
        *,
        turn: Turn | None = None,
        client_tools: Sequence[Tool] = (),
        goals: GoalKeeper | None = None,
        resume: tuple[Tool, ClientToolResult] | None = None,
        pipe: EventPipe | None = None,
    ) -> None:
        self.spec = agent = spec
        self.pipe = pipe if pipe is not None else EventPipe()
        """The run's pipe: its events are built only while some sink hears them."""
        self.cancel = cancel or threading.Event()
        self.driver: Driver = driver or SyncDriver(self.cancel)
        self.transcript = transcript
        self.messages = transcript.messages
        self.turn = turn or Turn()
        self.client_tools = {t.name: t for t in client_tools}
        self.goals = goals
        self._resume = resume
        self.graph = run_graph(agent, client_tools)
        self.loaded: list[Skill] = []
        self.steps = 0
        self.llm_calls = 0
        self.repairs = RepairBudget(agent.max_repairs)
        self.recorder = UsageRecorder()
        self._system_record: ProviderRecord | None = None
        self._menu: tuple[dict[str, Tool], dict[str, Skill], dict[str, Tool]] | None = None
        self._heard = False  # whether the step in progress announces itself
        self._view = ConversationView(agent.endpoint) if agent.endpoint else None
        self.defaults = list(agent.default_tools)
        self._prompt_tool: Tool | None = None
        self._first_prompt: Tool | None = None
        if agent.initial_prompt is not None:
            self._first_prompt = make_initial_prompt_tool(agent.initial_prompt)
        if agent.llm_driven:
            self._prompt_tool = self._prompt_llm_tool()
            self.defaults.append(self._prompt_tool)
        for skill in agent.auto_loaded_skills:
            self.load_skill(skill, announce=False)

    # -- what the LLM may choose -------------------------------------------------------------

    def actions(self) -> dict[str, Tool]:
        """Active tools the LLM can invoke: listed or loaded tools that are not chained."""
        return dict(self._choices()[0])

    def offered_skills(self) -> dict[str, Skill]:
        return dict(self._choices()[1])

    def passive(self) -> dict[str, Tool]:
        return dict(self._choices()[2])

    def _choices(self) -> tuple[dict[str, Tool], dict[str, Skill], dict[str, Tool]]:
        """The actions, offered skills and passive tools, kept until a skill is loaded (the
        only change to them during a run): an LLM step reads them twice."""
        choices = self._menu
        if choices is None:
            active = dict(self.client_tools)
            active.update({t.name: t for t in self.spec.tools if not t.is_chained})
            for skill in self.loaded:
                active.update({t.name: t for t in skill.tools if not t.is_chained})
            if self.spec.ask_user_tool is not None:
                active[self.spec.ask_user_tool.name] = self.spec.ask_user_tool
            loaded = {skill.name for skill in self.loaded}
            offered = {s.name: s for s in self.spec.skills if s.name not in loaded}
            passive = {name: t for name, t in self.graph.tools.items() if t.is_chained}
            choices = self._menu = (active, offered, passive)
        return choices

    def system_prompt(self) -> str:
        prompt = render_system_prompt(
            self.spec.system_prompt,
            automatic_tool_prompt=self.spec.automatic_tool_prompt,
            actions=self._choices()[0].values(),
            offered_skills=self._choices()[1].values(),
            loaded_skills=self.loaded,
        )
        context = self.turn.viewing_context
        if context is None:
            return prompt
        shown = context.model_dump_json(exclude_defaults=True)
        return f"{prompt}\n\n## What the user is looking at\n{shown}"

    # -- the loop ------------------------------------------------------------------------------

    @property
    def usage(self) -> RunUsage:
        """The LLM calls made while ``recording_usage(self.recorder)`` is in force (the
        agent's own and its tools'; nested agents record into their own)."""
        return self.recorder.usage()

    async def run(self) -> Stop | ClientToolUse:
        self.driver.attach()
        try:
            if self._resume is not None:
                result = await self.follow(*self._resume)
                if result is not None and not self._goes_on(result):
                    return result
            elif self._first_prompt is not None and needs_first_message(self.messages):
                # Once, before the defaults: they (and the LLM) start from the user's message.
                result = await self.run_chain(self._first_prompt, Empty(), "default")
                if result is not None:
                    return result
            while True:
                for default in self.defaults:
                    result = await self.run_chain(default, default.input_type(), "default")
                    if result is not None:
                        if self._goes_on(result):
                            break  # the LLM was told which goals are missing
                        return result
        except asyncio.CancelledError:
            if self.driver.take_interrupt():  # agent.cancel(), not the task's owner
                raise self.cancelled_error() from None
            raise
        finally:
            self.driver.close()

    def _goes_on(self, result: Stop | ClientToolUse) -> bool:
        """At a Stop: True when goals of the turn are unmet and the LLM was re-prompted."""
        if not isinstance(result, Stop) or self.goals is None:
            return False
        return self.goals.reprompt(result, self.transcript)

    async def follow(self, tool: Tool, output: Empty) -> Stop | ClientToolUse | None:
        """Continue after ``tool`` produced ``output`` (a client tool's submitted result)."""
        try:
            child = self.graph.next_in_chain(tool, output)
        except ChainConflict as conflict:
            raise ChainConflictError(str(conflict), messages=self.messages) from None
        if child is None:
            return None
        return await self.run_chain(child, output, "chained")

    async def run_chain(
        self, tool: Tool, value: Empty, trigger: str
    ) -> Stop | ClientToolUse | None:
        """Run ``tool`` and whatever its output leads to; Stop ends the run, and so does a
        client tool (the run waits for its result)."""
        current, how = tool, trigger
        inline = self.driver.calls_inline
        while True:
            if inline and not current.is_async and current is not self._prompt_tool:
                output = self.execute_inline(current, value, how)
            else:
                output = await self.execute(current, value, how)
            if output is None:
                return None  # the tool asked the LLM to try again
            if isinstance(output, _ENDS):
                return output
            if isinstance(output, Invoke):
                target = self.resolve(output, current)
                if target is None:
                    return None  # a skill was loaded; the chain ends there
                current, value, how = target, output.input, "invoked"
                continue
            try:
                child = self.graph.next_in_chain(current, output)
            except ChainConflict as conflict:
                raise ChainConflictError(str(conflict), messages=self.messages) from None
            if child is None:
                return None
            current, value, how = child, output, "chained"

    def resolve(self, invoke: Invoke, caller: Tool) -> Tool | None:
        actions, skills, _ = self._choices()
        skill = skills.get(invoke.action)
        if skill is not None:
            self.steps += 1
            self.repairs.reset()
            self.load_skill(skill, announce=True)
            return None
        target = actions.get(invoke.action) or self.graph.tools.get(invoke.action)
        if (
            target is not None
            and target.name in self.client_tools
            and caller is not self._prompt_tool
        ):
            raise ToolExecutionError(
                f"tool {caller.name!r} asked to invoke the client tool {target.name!r}; only "
                "the LLM calls client tools",
                tool=caller.name,
                messages=self.messages,
            )
        if target is None:
            raise ToolExecutionError(
                f"tool {caller.name!r} asked to invoke {invoke.action!r}, which this agent "
                "does not have",
                tool=caller.name,
                messages=self.messages,
            )
        if not isinstance(invoke.input, target.input_type):
            try:
                invoke.input = target.input_type.model_validate(invoke.input.model_dump())
            except ValueError as error:
                raise ToolExecutionError(
                    f"tool {caller.name!r} invoked {target.name!r} with input that does not "
                    f"fit {target.input_type.__name__}: {error}",
                    tool=caller.name,
                    messages=self.messages,
                ) from error
        return target

    def cancelled_error(self) -> AgentCancelledError:
        return AgentCancelledError(
            f"the run was cancelled after {self.steps} step(s)", messages=self.messages
        )

    async def execute(self, tool: Tool, value: Empty, trigger: str) -> Empty | ClientToolUse | None:
        driver = self.driver
        if not driver.calls_inline:
            await driver.pause()
        begun = self._start_step(tool, value, trigger)
        if isinstance(begun, ClientToolUse):
            return begun
        try:
            if tool is self._prompt_tool:
                output: Empty = await self._prompt_llm(value, self.messages)
            else:
                try:
                    output = tool.checked(await driver.call_tool(tool, value, self.messages))
                finally:
                    self.transcript.adopt()  # what the tool appended to its messages itself
        except AgentRunError:
            raise
        except Exception as error:
            self._failed_step(tool, error)
            return None
        return self._finish_step(tool, output, trigger, begun)

    def execute_inline(
        self, tool: Tool, value: Empty, trigger: str
    ) -> Empty | ClientToolUse | None:
        """``execute`` for a sync tool under a driver that lets the scheduler call it itself
        (``calls_inline``): the same step without a coroutine."""
        begun = self._start_step(tool, value, trigger)
        if isinstance(begun, ClientToolUse):
            return begun
        try:
            try:
                output = tool.checked(tool.func(value, self.messages))
            finally:
                self.transcript.adopt()  # what the tool appended to its messages itself
        except AgentRunError:
            raise
        except Exception as error:
            self._failed_step(tool, error)
            return None
        return self._finish_step(tool, output, trigger, begun)

    def _start_step(self, tool: Tool, value: Empty, trigger: str) -> ClientToolUse | float:
        """Count the step and announce it; the time it started (or, for a client tool, the
        use the client answers: it never runs here)."""
        if self.cancel.is_set():
            raise self.cancelled_error()
        self.steps += 1
        if self.steps > self.spec.max_steps:
            raise MaxStepsExceededError(
                f"the run took more than {self.spec.max_steps} steps without a Stop",
                messages=self.messages,
            )
        if self.client_tools and self.client_tools.get(tool.name) is tool:
            # The action just recorded is the pending use the client answers.
            seq = self.transcript.last_seq
            arguments = value.model_dump(mode="json", exclude={"truncation"})
            return ClientToolUse(tool_use_id=f"tu_{seq}", tool_name=tool.name, input=arguments)
        pipe = self.pipe
        # Asked once a step: a sink subscribed meanwhile hears from the next step on.
        self._heard = heard = pipe.heard
        if heard:
            pipe.emit(ToolStarted(agent=self.spec.name, tool=tool.name, trigger=trigger))
        return time.perf_counter()

    def _failed_step(self, tool: Tool, error: Exception) -> None:
        """A tool's Retry goes back to the LLM (the step then ends the chain); anything else
        ends the run."""
        if isinstance(error, Retry):
            if not self.spec.llm_driven:
                raise ToolExecutionError(
                    f"tool {tool.name!r} asked for a retry ({error}), but a deterministic "
                    "agent has no LLM to correct",
                    tool=tool.name,
                    messages=self.messages,
                ) from error
            self.reject(None, str(error), what=f"call of {tool.name!r}", caller=tool.name)
            return None
        if self.cancel.is_set():  # e.g. the endpoint gave up because we cancelled
            raise self.cancelled_error() from error
        raise ToolExecutionError(
            f"tool {tool.name!r} failed: {type(error).__name__}: {error}",
            tool=tool.name,
            messages=self.messages,
        ) from error

    def _finish_step(self, tool: Tool, output: Empty, trigger: str, started: float) -> Empty:
        duration = time.perf_counter() - started
        if tool is self._first_prompt and isinstance(output, Str):
            self.transcript.append(first_message(output))
        elif not tool.records_own_output:
            images = output.__dict__.get("images")
            self.transcript.append(
                trusted_message(
                    Role.TOOL,
                    output.value if isinstance(output, RawText) else payload_json(output),
                    images=[] if images is None else images_of(output),
                    caller=tool.name,
                    truncation=output.truncation,
                    message_kind="tool_result",
                ),
                duration,
            )
        if trigger == "invoked":
            self.repairs.reset()  # the decision held: the next one gets the whole budget
        if self._heard:
            event = ToolFinished(
                agent=self.spec.name, tool=tool.name, output=output, duration_s=duration
            )
            self.pipe.emit(event)
        return output

    def load_skill(self, skill: Skill, *, announce: bool) -> None:
        for item in skill.with_prerequisites():
            if any(loaded is item for loaded in self.loaded):
                continue
            self.graph.add(item.tools, origin=f"skill {item.name!r}")
            self.loaded.append(item)
            self._system_record = None
            self._menu = None
            emit(SkillLoaded(agent=self.spec.name, skill=item.name))
            if announce:
                names = ", ".join(t.name for t in item.tools if not t.is_chained) or "none"
                self.transcript.append(
                    Message(
                        role=Role.TOOL,
                        content=f"Skill {item.name!r} loaded; its instructions are in the "
                        f"system prompt. New actions: {names}.",
                        caller=item.name,
                        message_kind="skill_loaded",
                    )
                )

    # -- prompt_llm ----------------------------------------------------------------------------

    def _prompt_llm_tool(self) -> Tool:
        return Tool(
            name=PROMPT_LLM,
            instruction="Ask the agent's LLM which action to take next.",
            input_type=Empty,
            output_types=(Invoke,),
            func=_executed_by_the_run,
            records_own_output=True,
        )

    def reject(
        self,
        reply: str | None,
        reason: str,
        *,
        model: str | None = None,
        what: str = "reply",
        caller: str | None = None,
    ) -> None:
        """Send a correction back to the LLM (a repair), or end the run once they are spent."""
        emit(LLMReplyRejected(agent=self.spec.name, reason=reason, reply=reply or ""))
        try:
            exchange = self.repairs.reject(reply, reason, model=model, what=what, caller=caller)
        except LLMReplyError as error:
            for message in error.exchange:
                self.transcript.append(message)
            raise AgentReplyError(str(error), messages=self.messages) from error
        for message in exchange:
            self.transcript.append(message)

    async def _prompt_llm(self, input: Empty, messages: list[Message]) -> Invoke:
        endpoint = self.spec.endpoint
        if endpoint is None or self._view is None:  # guarded at construction
            raise AgentConfigurationError("prompt_llm needs an agent_endpoint")
        actions, skills, passive = self._choices()
        if self._system_record is None:
            self._system_record = {"role": "system", "content": self.system_prompt()}
        agent = self.spec.name
        transcript = self.transcript
        wants_deltas = transcript.streams or self.pipe.wants_deltas
        while True:
            on_delta = _DeltaRelay(agent, transcript).feed if wants_deltas else None
            records = self._view.records(messages, [self._system_record])
            self.llm_calls += 1
            if transcript.streams or self.pipe.heard:
                requested = LLMRequested(
                    agent=agent,
                    endpoint=endpoint.name,
                    model=endpoint.model_name,
                    messages=len(records),
                )
                transcript.on_reply(requested)
                self.pipe.emit(requested)
            completion = await self.driver.complete(endpoint, records, on_delta)
            try:
                invoke = parse_action(
                    completion.text, actions=actions, skills=skills, passive=passive
                )
            except REPLY_ERRORS as error:
                record_usage(endpoint, completion, rejected=True)
                self.reject(completion.text, reason_of(error), model=completion.model)
                continue
            record_usage(endpoint, completion)
            break
        transcript.append(
            trusted_message(
                Role.ASSISTANT,
                action_json(invoke),
                images=[],
                caller=PROMPT_LLM,
                message_kind="action",
                endpoint=endpoint.name,
                model=completion.model or endpoint.model_name,
                token_input=completion.usage.input_tokens,
                token_output=completion.usage.output_tokens,
            )
        )
        if self.pipe.heard:
            replied = LLMReplied(
                agent=agent,
                text=completion.text,
                input_tokens=completion.usage.input_tokens,
                output_tokens=completion.usage.output_tokens,
            )
            self.pipe.emit(replied)
        return invoke


def _executed_by_the_run(input: Empty, messages: list[Message]) -> Invoke:
    raise RuntimeError("prompt_llm runs inside its agent's run only")


class _DeltaRelay:
    """Raw deltas of one reply as LLMDelta events, and its prose fields as LLMProseDelta,
    to the run's transcript (a reply it keeps as it streams in) and its pipe."""

    def __init__(self, agent: str, transcript: Transcript) -> None:
        self._agent = agent
        self._transcript = transcript
        self._prose = ProseStream()

    def feed(self, text: str) -> None:
        agent, transcript = self._agent, self._transcript
        delta = LLMDelta(agent=agent, text=text)
        transcript.on_reply(delta)
        emit(delta)
        prose = self._prose
        for field, chunk in prose.feed(text):
            event = LLMProseDelta(agent=agent, field=field, text=chunk, action=prose.action)
            transcript.on_reply(event)
            emit(event)
