"""Tools, factories, skills and the built-in ``stop`` tool."""

from roboz.tools.skill import Skill, SkillFactory
from roboz.tools.stopping import stop
from roboz.tools.tool import (
    ChainCondition,
    Factory,
    Retry,
    Tool,
    ToolDefinitionError,
    ToolOutputError,
    factory,
    tool,
)

__all__ = [
    "ChainCondition",
    "Factory",
    "Retry",
    "Skill",
    "SkillFactory",
    "Tool",
    "ToolDefinitionError",
    "ToolOutputError",
    "factory",
    "stop",
    "tool",
]
