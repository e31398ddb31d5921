"""What a run needs to know about its agent, frozen when the run starts."""

from __future__ import annotations

from dataclasses import dataclass

from roboz.agent.mode import AgentMode
from roboz.llm import EndpointLike
from roboz.tools import Skill, Tool


@dataclass(frozen=True, slots=True)
class RunSpec:
    """An agent's configuration as one run sees it; the run never reads the Agent itself.

    Built by ``Agent`` at the start of every run, so a setting changed between runs applies
    to the next one and never to a run in progress.
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
    initial_prompt: str | None = None
    """The question that asks the user for the first message of a run that has none."""

    @property
    def llm_driven(self) -> bool:
        return self.mode is not AgentMode.DETERMINISTIC
