"""Compaction: the compaction default tool as a capability of a deployable agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roboz.deployment import Capability, RuntimeValue, ToolLabel
from roboz.llm import EndpointLike
from roboz.shed.tools.compaction import DEFAULT_NAME, Compactor

if TYPE_CHECKING:
    from roboz.deployment import DeployableAgent
    from roboz.runtime.events import EventPipe

COMPACTION_LABEL = ToolLabel(DEFAULT_NAME, default=True)


class Compaction(Capability):
    """Runs before every LLM call and summarizes older messages when the context reaches
    ``threshold`` of ``max_context_tokens`` (see :class:`~roboz.shed.tools.compaction.Compactor`).

    ``endpoint`` summarizes; by default the agent's own endpoint does.
    """

    def __init__(
        self,
        *,
        endpoint: EndpointLike | None = None,
        threshold: float = 0.8,
        max_context_tokens: int | None = None,
        summary_max_tokens: int | None = None,
        max_attempts: int = 3,
        timeout_s: float = 120.0,
        label: ToolLabel = COMPACTION_LABEL,
    ) -> None:
        if not isinstance(label, ToolLabel) or not label.default:
            raise TypeError(
                f"Compaction runs before every LLM call, so its label must be a ToolLabel "
                f"with default=True, got {label!r}"
            )
        super().__init__(label=label)
        self.settings = {
            "endpoint": endpoint,
            "threshold": threshold,
            "max_context_tokens": max_context_tokens,
            "summary_max_tokens": summary_max_tokens,
            "max_attempts": max_attempts,
            "timeout_s": timeout_s,
        }
        Compactor(**self.settings)  # type: ignore[arg-type]  # bad settings fail here, not at build

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        settings = dict(self.settings)
        settings["endpoint"] = settings["endpoint"] or agent.agent_endpoint
        return (Compactor(name=self.name, **settings).tool(),)  # type: ignore[arg-type]

    def endpoints(self) -> tuple[EndpointLike, ...]:
        endpoint = self.settings["endpoint"]
        return (endpoint,) if endpoint is not None else ()  # type: ignore[return-value]
