"""What a run needs to know about its agent: the definition, frozen."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roboz.agent.mode import AgentMode
from roboz.llm import EndpointLike
from roboz.models import Message
from roboz.runtime.events import EventPipe
from roboz.runtime.io import UserIO
from roboz.threads import AnalysisScope
from roboz.tools import Skill, Tool

if TYPE_CHECKING:
    from roboz.agent.turn import GoalCheck
    from roboz.threads import ThreadStore


@dataclass(frozen=True, slots=True)
class RunSpec:
    """An agent's configuration as its runs see it; a run never reads the Agent itself.

    Built once by ``Agent`` at construction (an Agent is immutable; ``Agent.replace`` makes
    another), so any number of runs share it, on any thread or task.
    """

    name: str
    system_prompt: str
    mode: AgentMode
    endpoint: EndpointLike | None
    tools: tuple[Tool, ...]
    default_tools: tuple[Tool, ...]
    skills: tuple[Skill, ...]
    auto_loaded_skills: tuple[Skill, ...]
    ask_user_tool: Tool | None
    automatic_tool_prompt: bool
    max_steps: int
    max_repairs: int
    store: ThreadStore | None = None
    initial_messages: tuple[Message, ...] = ()
    scope: AnalysisScope | None = None
    goal_checks: Mapping[str, GoalCheck] = field(default_factory=dict[str, "GoalCheck"])
    max_goal_prompts: int = 2
    event_pipe: EventPipe = field(default_factory=EventPipe)
    user_io: UserIO | None = None
    initial_prompt: str | None = None
    """The question that asks the user for the first message of a run that has none."""

    @property
    def llm_driven(self) -> bool:
        return self.mode is not AgentMode.DETERMINISTIC
