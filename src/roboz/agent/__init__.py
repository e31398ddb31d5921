"""Agents: the scheduler loop, modes and run errors."""

from roboz.agent.agent import Agent
from roboz.agent.errors import (
    AgentCancelledError,
    AgentConfigurationError,
    AgentReplyError,
    AgentRunError,
    ChainConflictError,
    MaxStepsExceededError,
    ToolExecutionError,
)
from roboz.agent.mode import AgentMode

__all__ = [
    "Agent",
    "AgentCancelledError",
    "AgentConfigurationError",
    "AgentMode",
    "AgentReplyError",
    "AgentRunError",
    "ChainConflictError",
    "MaxStepsExceededError",
    "ToolExecutionError",
]
