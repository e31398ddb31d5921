"""The Librarian: the DETERMINISTIC background agent that keeps a project's long-term memory.

Each sweep runs its default tools in order: snapshots of what is new in the watched agents'
runs, consolidation of pending snapshots into the memory document, retention, and the cadence
(sleep, or stop after the final sweep). Summaries go to ``agent_endpoint``; their prompts are
recorded in the Librarian's own run (a thread of the project's store), never in a watched
agent's.
"""

from __future__ import annotations

from collections.abc import Sequence

from roboz.agent import Agent, AgentMode
from roboz.deployment import DeployableAgent
from roboz.llm import EndpointLike
from roboz.runtime.events import EventPipe
from roboz.shed.capabilities.memory import (
    MAINTENANCE,
    ArtifactRetention,
    ConversationSnapshots,
    MaintenanceCadence,
    MemoryConsolidation,
)
from roboz.shed.sandbox import Sandbox, SandboxError
from roboz.shed.tools.maintenance import Maintenance
from roboz.threads import SQLiteThreadStore

LIBRARIAN_DESCRIPTION = "Snapshots, consolidates and prunes the project's long-term memory."


class StoredAgent(DeployableAgent):
    """A definition whose runtimes persist their runs in the sandbox's run store."""

    def __init__(self, *args: object, sandbox: Sandbox, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.sandbox = sandbox
        self.max_steps: int | None = None
        self._store: SQLiteThreadStore | None = None

    def build(self) -> tuple[Agent, tuple[Agent, ...]]:
        runtime, background = super().build()
        if self._store is None:  # one store (and its connections) for every runtime built
            self._store = SQLiteThreadStore(self.sandbox.prepare().run_store)
        # An Agent is immutable (its runs share it): the store and step limit make another.
        changes: dict[str, object] = {"store": self._store}
        if self.max_steps is not None:
            changes["max_steps"] = self.max_steps
        return runtime.replace(**changes), background


def librarian(
    sandbox: Sandbox,
    watched_agent_names: Sequence[str],
    *,
    agent_endpoint: EndpointLike | None,
    name: str = "librarian",
    interval_s: float = 60.0,
    event_pipe: EventPipe | None = None,
) -> StoredAgent:
    """A fresh Librarian for ``sandbox``'s scoped project, watching the runs of
    ``watched_agent_names``; ``agent_endpoint`` writes the summaries.

    Its steps are the capabilities ConversationSnapshots, MemoryConsolidation,
    ArtifactRetention and MaintenanceCadence, with their defaults; replace one with
    ``set_capability_selection`` and ``add_capabilities`` to change its settings. Give it the
    watched agents' ``event_pipe`` so it wakes as soon as one of their runs ends.
    """
    if sandbox.project is None:
        raise SandboxError("the Librarian keeps one project's memory: use sandbox.scoped(name)")
    watched = tuple(watched_agent_names)
    if not watched or not all(isinstance(n, str) and n for n in watched):
        raise ValueError(f"the Librarian needs the names of the agents it watches, got {watched!r}")
    if name in watched:
        raise ValueError(f"the Librarian {name!r} cannot watch itself")
    definition = StoredAgent(
        name,
        description=LIBRARIAN_DESCRIPTION,
        mode=AgentMode.DETERMINISTIC,
        agent_endpoint=agent_endpoint,
        capabilities=(
            ConversationSnapshots(),
            MemoryConsolidation(),
            ArtifactRetention(),
            MaintenanceCadence(interval_s=interval_s),
        ),
        event_pipe=event_pipe,
        sandbox=sandbox,
    )
    definition.max_steps = 10**9  # it sweeps for as long as the watched agents work
    definition.set_attributes(**{MAINTENANCE: Maintenance(sandbox, watched, own=name)})
    return definition
