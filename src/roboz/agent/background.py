"""Background agents: started by a default tool of their parent, supervised while it runs.

The tool starts each background agent once, in its own Python thread, the first time it runs
in a parent run. A background agent that fails is reported (BackgroundAgentFailed on the
parent's event pipe, never silent) and restarted after ``restart_delay_s``; one that reaches
its Stop is done. All of them are cancelled and joined when the parent's run ends, however
it ends (the supervisor listens for the parent's AgentFinished / AgentFailed); a run that
this cancellation ends is a normal stop (BackgroundAgentStopped, "parent ended"), not a failure.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roboz.agent.context import current_run
from roboz.agent.errors import AgentCancelledError
from roboz.models import Empty, Message
from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    Event,
    EventPipe,
    RunPipe,
    current_pipe,
)
from roboz.tools import Tool

if TYPE_CHECKING:
    from roboz.agent.agent import Agent
    from roboz.agent.session import AgentRun

DEFAULT_NAME = "start_background_agents"


@dataclass(frozen=True)
class BackgroundAgentStarted(Event):
    background: str = ""
    attempt: int = 1


@dataclass(frozen=True)
class BackgroundAgentFailed(Event):
    background: str = ""
    error: str = ""
    restarting: bool = True


@dataclass(frozen=True)
class BackgroundAgentStopped(Event):
    background: str = ""
    reason: str = ""
    """"finished" (it reached its Stop) or "parent ended"."""


class _Supervisor:
    """Runs one background agent until it stops or the parent's run ends."""

    def __init__(self, agent: Agent, parent: str | None, pipe: EventPipe, delay: float) -> None:
        self.agent = agent
        self.parent = parent
        self.pipe = pipe
        self.delay = delay
        self.ending = threading.Event()
        self.run: AgentRun | None = None
        """The attempt in progress: stopping cancels it (never another run of the agent)."""
        self.thread = threading.Thread(
            target=self._loop, name=f"roboz-background-{agent.name}", daemon=True
        )

    def _loop(self) -> None:
        attempt = 0
        while not self.ending.is_set():
            attempt += 1
            self.pipe.emit(
                BackgroundAgentStarted(
                    agent=self.parent, background=self.agent.name, attempt=attempt
                )
            )
            self.run = run = self.agent.new_run()
            if self.ending.is_set():
                break
            try:
                run.run_sync()
            except Exception as error:
                ending = self.ending.is_set()
                if ending and isinstance(error, AgentCancelledError):
                    break  # stop() cancelled it because the parent ended: a normal stop
                self.pipe.emit(
                    BackgroundAgentFailed(
                        agent=self.parent,
                        background=self.agent.name,
                        error=f"{type(error).__name__}: {error}",
                        restarting=not ending,
                    )
                )
                if self.ending.wait(self.delay):
                    break
                continue
            self.pipe.emit(
                BackgroundAgentStopped(
                    agent=self.parent, background=self.agent.name, reason="finished"
                )
            )
            return
        self.pipe.emit(
            BackgroundAgentStopped(
                agent=self.parent, background=self.agent.name, reason="parent ended"
            )
        )

    def stop(self) -> None:
        self.ending.set()
        run = self.run
        if run is not None:
            run.cancel()


class BackgroundAgents:
    """The default tool that starts ``agents`` (build it with :meth:`tool`)."""

    def __init__(
        self, agents: Sequence[Agent], *, restart_delay_s: float = 1.0, name: str = DEFAULT_NAME
    ) -> None:
        self.agents = tuple(agents)
        self.restart_delay_s = restart_delay_s
        self.name = name
        self._running: list[_Supervisor] = []
        self._lock = threading.Lock()

    def tool(self) -> Tool:
        return Tool(
            name=self.name,
            instruction="Start the background agents of this agent, once per run.",
            input_type=Empty,
            output_types=(Empty,),
            func=self._start,
            records_own_output=True,  # nothing to tell the LLM; events report what happens
        )

    def _start(self, input: Empty, messages: list[Message]) -> Empty:
        with self._lock:
            if self._running or not self.agents:
                return Empty()
            parent = current_run()
            pipe = parent.pipe if parent else current_pipe() or EventPipe()
            name = parent.agent if parent else None
            self._running = [
                _Supervisor(agent, name, pipe, self.restart_delay_s) for agent in self.agents
            ]

            run_id = parent.run_id if parent else None

            def on_parent_end(event: Event) -> None:
                if not isinstance(event, AgentFinished | AgentFailed) or event.agent != name:
                    return
                if run_id is None or event.run_id == run_id:  # the parent run's own end
                    unsubscribe()
                    self.stop()

            # Heard on the agent's pipe, after the sinks subscribed there before (a
            # Librarian's final sweep of the ending run), not on the run's own pipe, whose
            # sinks hear an event first.
            outer = pipe.outer if isinstance(pipe, RunPipe) else pipe
            unsubscribe = outer.subscribe(on_parent_end)
            for supervisor in self._running:
                supervisor.thread.start()
        return Empty()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel every background agent and wait for it (called when the parent ends)."""
        with self._lock:
            running, self._running = self._running, []
        for supervisor in running:
            supervisor.stop()
        for supervisor in running:
            if supervisor.thread is not threading.current_thread():
                supervisor.thread.join(timeout_s)


def background_agents_tool(agents: Sequence[Agent], *, restart_delay_s: float = 1.0) -> Tool:
    """A default tool that runs ``agents`` in the background of each parent run."""
    return BackgroundAgents(agents, restart_delay_s=restart_delay_s).tool()
