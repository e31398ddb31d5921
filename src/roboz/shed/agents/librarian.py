"""The Librarian: the DETERMINISTIC background agent that keeps a project's long-term memory.

Each sweep runs its default tools in order: snapshots of what is new in the watched agents'
runs, consolidation of pending snapshots into the memory document, retention, and the cadence
(sleep, or stop after the final sweep). Summaries go to ``agent_endpoint``; their prompts are
recorded in the Librarian's own run (a thread of the project's store), never in a watched
agent's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

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
        super().__init__(*args, sandbox=sandbox, **kwargs)  # type: ignore[arg-type]
        # The layout the run store lives in, kept apart from ``sandbox`` (which may be given
        # a narrower PermissionPolicy later): the runs stay where the layout puts them.
        self.layout = sandbox
        self.max_steps: int | None = None
        self._store: SQLiteThreadStore | None = None

    def build(self) -> tuple[Agent, tuple[Agent, ...]]:
        runtime, background = super().build()
        if self._store is None:  # one store (and its connections) for every runtime built
            self._store = SQLiteThreadStore(self.layout.prepare().run_store)
        # An Agent is immutable (its runs share it): the store and step limit make another.
        changes: dict[str, object] = {"store": self._store}
        if self.max_steps is not None:
            changes["max_steps"] = self.max_steps
        return runtime.replace(**changes), background


_StepT = TypeVar("_StepT", ConversationSnapshots, MemoryConsolidation, ArtifactRetention)


def _given(keyword: str, given: object, kind: type[_StepT]) -> _StepT:
    if given is None:
        return kind()
    if not isinstance(given, kind):
        raise TypeError(
            f"librarian({keyword}=...) must be an instance of {kind.__name__}, or None for its "
            f"defaults; got {given!r}"
        )
    return given


def librarian(
    sandbox: Sandbox,
    watched_agent_names: Sequence[str],
    *,
    agent_endpoint: EndpointLike | None,
    name: str = "librarian",
    interval_s: float = 60.0,
    snapshots: ConversationSnapshots | None = None,
    consolidation: MemoryConsolidation | None = None,
    retention: ArtifactRetention | None = None,
    event_pipe: EventPipe | None = None,
) -> StoredAgent:
    """A fresh Librarian for ``sandbox``'s scoped project, watching the runs of
    ``watched_agent_names``; ``agent_endpoint`` writes the summaries.

    Its steps, run in this order each sweep, are capabilities, and its settings are theirs:

    - ``snapshots``: a ConversationSnapshots (when a run's new part is snapshotted, the
      snapshot's token budget, the summarizer's attempts and timeout, its own endpoint);
    - ``consolidation``: a MemoryConsolidation (the memory document's token budget, snapshots
      per consolidation, attempts, timeout, endpoint);
    - ``retention``: an ArtifactRetention (how many runs, snapshots and memory versions are
      kept, and for how long);
    - the cadence, a MaintenanceCadence sleeping ``interval_s`` seconds between sweeps.

    None means that capability with its defaults. The steps make up the sweep, so they are
    set here, once: they cannot be deselected or added again later. Give the Librarian the
    watched agents' ``event_pipe`` so it wakes as soon as one of their runs ends.
    """
    if sandbox.project is None:
        raise SandboxError("the Librarian keeps one project's memory: use sandbox.scoped(name)")
    watched = tuple(watched_agent_names)
    if not watched or not all(isinstance(n, str) and n for n in watched):
        raise ValueError(f"the Librarian needs the names of the agents it watches, got {watched!r}")
    if name in watched:
        raise ValueError(f"the Librarian {name!r} cannot watch itself")
    steps = (
        _given("snapshots", snapshots, ConversationSnapshots),
        _given("consolidation", consolidation, MemoryConsolidation),
        _given("retention", retention, ArtifactRetention),
        MaintenanceCadence(interval_s=interval_s),
    )
    definition = StoredAgent(
        name,
        description=LIBRARIAN_DESCRIPTION,
        mode=AgentMode.DETERMINISTIC,
        agent_endpoint=agent_endpoint,
        capabilities=steps,
        event_pipe=event_pipe,
        sandbox=sandbox,
    )
    definition.max_steps = 10**9  # it sweeps for as long as the watched agents work
    definition.set_attributes(**{MAINTENANCE: Maintenance(sandbox, watched, own=name)})
    return definition
