"""RoboZ: typed LLM agents whose tools chain conditionally. Chain tools. Skip calls."""

from roboz.agent import Agent, AgentMode
from roboz.tools import Skill, factory, tool

__all__ = ["Agent", "AgentMode", "Skill", "factory", "tool"]
__version__ = "0.12.1a1"
