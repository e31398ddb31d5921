"""The Librarian's steps as capabilities, and the memory start-up of the agents it watches.

ConversationSnapshots, MemoryConsolidation, ArtifactRetention and MaintenanceCadence are
default tools of a DETERMINISTIC agent, run in that order each sweep. They read the shared
:class:`~roboz.shed.tools.maintenance.Maintenance` from their owner's ``maintenance``
attribute; summaries go to ``endpoint``, by default the owner's ``agent_endpoint``.
ProjectMemory gives a watched agent the latest memory at the start of each run and runs its
background agents (the Librarian first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from roboz.deployment import Capability, RuntimeValue, ToolLabel
from roboz.llm import EndpointLike
from roboz.shed.sandbox import Sandbox
from roboz.shed.tools import cadence, consolidation, retention, snapshots
from roboz.shed.tools.maintenance import Maintenance
from roboz.tools import Tool

if TYPE_CHECKING:
    from roboz.deployment import DeployableAgent
    from roboz.runtime.events import EventPipe

MAINTENANCE = "maintenance"


class _BuildsTool(Protocol):
    def tool(self) -> Tool: ...


class _Step(Capability):
    required_attributes = (MAINTENANCE,)
    default_name = ""

    def __init__(self, label: ToolLabel | None, endpoint: EndpointLike | None = None) -> None:
        label = label or ToolLabel(self.default_name, default=True)
        if not isinstance(label, ToolLabel) or not label.default:
            raise TypeError(
                f"{type(self).__name__} is a step of the Librarian's sweep, so its label must "
                f"be a ToolLabel with default=True, got {label!r}"
            )
        super().__init__(label=label)
        self.endpoint = endpoint

    def _context(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[Maintenance, Any]:
        maintenance = agent.attributes[MAINTENANCE]
        if not isinstance(maintenance, Maintenance):
            raise TypeError(f"{self.describe()}: the maintenance attribute must be a Maintenance")
        maintenance.listen(pipe)
        return maintenance, self.endpoint or agent.agent_endpoint

    def endpoints(self) -> tuple[EndpointLike, ...]:
        return (self.endpoint,) if self.endpoint is not None else ()

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        return (self._step(*self._context(agent, pipe)).tool(),)

    def _step(self, maintenance: Maintenance, endpoint: EndpointLike | None) -> _BuildsTool:
        """The step this capability adds (``endpoint`` is where its summaries go)."""
        raise NotImplementedError


class ConversationSnapshots(_Step):
    """Snapshot what is new in each watched run (see :mod:`roboz.shed.tools.snapshots`)."""

    default_name = snapshots.DEFAULT_NAME

    def __init__(
        self,
        *,
        endpoint: EndpointLike | None = None,
        threshold_tokens: int = 4000,
        max_snapshot_tokens: int = 1000,
        max_attempts: int = 2,
        timeout_s: float = 120.0,
        label: ToolLabel | None = None,
    ) -> None:
        super().__init__(label, endpoint)
        self.settings: dict[str, Any] = {
            "threshold_tokens": threshold_tokens,
            "max_snapshot_tokens": max_snapshot_tokens,
            "max_attempts": max_attempts,
            "timeout_s": timeout_s,
        }

    def _step(self, maintenance: Maintenance, endpoint: EndpointLike | None) -> _BuildsTool:
        return snapshots.Snapshots(maintenance, endpoint, name=self.name, **self.settings)


class MemoryConsolidation(_Step):
    """Merge pending snapshots into the memory document (:mod:`~roboz.shed.tools.consolidation`)."""

    default_name = consolidation.DEFAULT_NAME

    def __init__(
        self,
        *,
        endpoint: EndpointLike | None = None,
        max_memory_tokens: int = 2000,
        max_batch: int = 20,
        max_attempts: int = 2,
        timeout_s: float = 120.0,
        label: ToolLabel | None = None,
    ) -> None:
        super().__init__(label, endpoint)
        self.settings: dict[str, Any] = {
            "max_memory_tokens": max_memory_tokens,
            "max_batch": max_batch,
            "max_attempts": max_attempts,
            "timeout_s": timeout_s,
        }

    def _step(self, maintenance: Maintenance, endpoint: EndpointLike | None) -> _BuildsTool:
        return consolidation.Consolidation(maintenance, endpoint, name=self.name, **self.settings)


class ArtifactRetention(_Step):
    """Delete old runs, snapshots and memory versions that are safe to go
    (:mod:`~roboz.shed.tools.retention`)."""

    default_name = retention.DEFAULT_NAME

    def __init__(
        self,
        *,
        max_runs: int | None = 200,
        max_run_age_s: float | None = None,
        max_snapshots: int | None = 200,
        max_snapshot_age_s: float | None = None,
        max_memory_versions: int | None = 10,
        max_memory_age_s: float | None = None,
        label: ToolLabel | None = None,
    ) -> None:
        super().__init__(label)
        self.settings: dict[str, Any] = {
            "max_runs": max_runs,
            "max_run_age_s": max_run_age_s,
            "max_snapshots": max_snapshots,
            "max_snapshot_age_s": max_snapshot_age_s,
            "max_memory_versions": max_memory_versions,
            "max_memory_age_s": max_memory_age_s,
        }

    def _step(self, maintenance: Maintenance, endpoint: EndpointLike | None) -> _BuildsTool:
        return retention.Retention(maintenance, name=self.name, **self.settings)


class MaintenanceCadence(_Step):
    """Sleep between sweeps, wake early when a watched run ends, stop after the final sweep
    (:mod:`~roboz.shed.tools.cadence`)."""

    default_name = cadence.DEFAULT_NAME

    def __init__(self, *, interval_s: float = 60.0, label: ToolLabel | None = None) -> None:
        super().__init__(label)
        self.interval_s = interval_s

    def _step(self, maintenance: Maintenance, endpoint: EndpointLike | None) -> _BuildsTool:
        return cadence.Cadence(maintenance, interval_s=self.interval_s, name=self.name)


class ProjectMemory(Capability):
    """For a watched agent: the latest memory as a start-up message of each run, and its
    background agents (give the Librarian first)."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        background_agents: Sequence[DeployableAgent] = (),
        label: ToolLabel | None = None,
    ) -> None:
        label = label or ToolLabel(consolidation.STARTUP_NAME, default=True, selectable=True)
        if not isinstance(label, ToolLabel) or not label.default:
            raise TypeError(f"ProjectMemory's label must be a default ToolLabel, got {label!r}")
        super().__init__(label=label)
        self.sandbox = sandbox
        self._background = tuple(background_agents)

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        return (consolidation.MemoryStartup(self.sandbox, name=self.name).tool(),)

    def background_agents(self) -> tuple[DeployableAgent, ...]:
        return self._background
