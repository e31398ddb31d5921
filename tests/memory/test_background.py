"""Background agents run beside their parent: started once, restarted when they die (with an
event), stopped when the parent's run ends."""

from __future__ import annotations

import threading
import time

import roboz.tools
from roboz import Agent, AgentMode, tool
from roboz.agent.background import (
    BackgroundAgentFailed,
    BackgroundAgentStarted,
    BackgroundAgentStopped,
    background_agents_tool,
)
from roboz.deployment import Capability, DeployableAgent, RuntimeValue, ToolLabel
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Str
from roboz.runtime.events import Event, EventPipe

ticks: list[float] = []
attempts: list[int] = []


@tool
def janitor_step(input: Empty, messages: list[Message]) -> Empty:
    """Tidy up a little; the first attempt crashes."""
    if not messages and len(attempts) == 0:
        attempts.append(1)
        raise RuntimeError("disk hiccup")
    ticks.append(time.monotonic())
    time.sleep(0.01)
    return Empty()


@tool
def wait_for_janitor(input: Str, messages: list[Message]) -> Str:
    """Wait until the janitor has done some work."""
    deadline = time.monotonic() + 10
    while len(ticks) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    return Str(value=f"{len(ticks)} ticks")


class WithJanitor(Capability):
    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        return (wait_for_janitor,)

    def background_agents(self) -> tuple[DeployableAgent, ...]:
        return (
            DeployableAgent(
                "janitor",
                mode=AgentMode.DETERMINISTIC,
                capabilities=[
                    Capability(label=ToolLabel("janitor_step", default=True), value=janitor_step)
                ],
            ),
        )


def test_background_agent_is_started_restarted_and_stopped_with_its_parent() -> None:
    ticks.clear()
    attempts.clear()
    events: list[Event] = []
    pipe = EventPipe([events.append])
    definition = DeployableAgent(
        "lead",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "wait_for_janitor", "value": "x"}, {"action": "stop", "value": "ok"}]
        ),
        capabilities=[
            WithJanitor(label=ToolLabel("wait_for_janitor")),
            Capability(label=ToolLabel("stop"), value=roboz.tools.stop),
        ],
        event_pipe=pipe,
    )
    runtime, background = definition.build()
    assert [a.name for a in background] == ["janitor"]
    assert runtime.default_tools[0].name == "start_background_agents"
    stop, conversation = runtime.invoke()
    assert stop.value == "ok"
    assert not any(m.caller == "start_background_agents" for m in conversation)
    mine = [e for e in events if getattr(e, "background", None) == "janitor"]
    kinds = [type(e) for e in mine]
    assert kinds.count(BackgroundAgentStarted) == 2  # once, then once more after the crash
    failed = [e for e in mine if isinstance(e, BackgroundAgentFailed)]
    assert failed[0].restarting and "disk hiccup" in failed[0].error
    stopped = [e for e in mine if isinstance(e, BackgroundAgentStopped)]
    assert [e.reason for e in stopped] == ["parent ended"]
    count = len(ticks)
    time.sleep(0.1)
    assert len(ticks) == count and count >= 3  # it worked, and it stopped with the parent


def test_background_agents_start_once_per_run() -> None:
    runs: list[int] = []

    @tool
    def once(input: Empty, messages: list[Message]) -> roboz.models.Stop:
        """Record a run and stop."""
        runs.append(1)
        return roboz.models.Stop(value="done")

    helper = Agent(name="helper", mode=AgentMode.DETERMINISTIC, default_tools=[once])
    lead = Agent(
        name="lead",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "wait", "value": "1"}] * 3 + [{"action": "stop", "value": "ok"}]
        ),
        tools=[wait_named("wait"), roboz.tools.stop],
        default_tools=[background_agents_tool([helper], restart_delay_s=0.01)],
    )
    lead.invoke()
    time.sleep(0.05)
    assert runs == [1]  # four LLM cycles, one start; a finished agent is not restarted


def wait_named(name: str) -> roboz.tools.Tool:
    @tool
    def wait(input: Str, messages: list[Message]) -> Str:
        """Wait a moment."""
        time.sleep(0.01)
        return Str(value="waited")

    return wait


def test_a_background_agent_cancelled_because_its_parent_ended_stopped_normally() -> None:
    working = threading.Event()

    @tool
    def keep_watch(input: Empty, messages: list[Message]) -> Empty:
        """Watch for as long as the parent runs (never stops by itself)."""
        working.set()
        time.sleep(0.01)
        return Empty()

    @tool
    def wait_for_watch(input: Str, messages: list[Message]) -> Str:
        """Return once the watcher is at work, so the parent ends while it runs."""
        assert working.wait(10), "the background agent never ran"
        return Str(value="watched")

    watcher = Agent(
        name="watcher", mode=AgentMode.DETERMINISTIC, default_tools=[keep_watch], max_steps=10**6
    )
    events: list[Event] = []
    lead = Agent(
        name="lead",
        agent_endpoint=MockLLMEndpoint(
            [{"action": "wait_for_watch", "value": "x"}, {"action": "stop", "value": "ok"}]
        ),
        tools=[wait_for_watch, roboz.tools.stop],
        default_tools=[background_agents_tool([watcher])],
        event_pipe=EventPipe([events.append]),
    )
    lead.invoke()
    mine = [e for e in events if getattr(e, "background", None) == "watcher"]
    assert [type(e) for e in mine] == [BackgroundAgentStarted, BackgroundAgentStopped]
    assert isinstance(mine[-1], BackgroundAgentStopped) and mine[-1].reason == "parent ended"
