"""Agents: the scheduler loop, modes and run errors."""

from roboz.agent.agent import Agent
from roboz.agent.client_tools import (
    ClientToolError,
    ClientToolResult,
    ClientToolTurn,
    ClientToolUse,
)
from roboz.agent.context import RunContext, current_run, current_scope, current_viewing_context
from roboz.agent.errors import (
    AgentCancelledError,
    AgentConfigurationError,
    AgentReplyError,
    AgentRunError,
    ChainConflictError,
    MaxStepsExceededError,
    ToolExecutionError,
)
from roboz.agent.goals import GoalCheck, GoalsFailed, declare_goal
from roboz.agent.mode import AgentMode
from roboz.agent.session import AgentRun
from roboz.agent.tasks import TASK_TOOLS

__all__ = [
    "TASK_TOOLS",
    "Agent",
    "AgentCancelledError",
    "AgentConfigurationError",
    "AgentMode",
    "AgentReplyError",
    "AgentRun",
    "AgentRunError",
    "ChainConflictError",
    "ClientToolError",
    "ClientToolResult",
    "ClientToolTurn",
    "ClientToolUse",
    "GoalCheck",
    "GoalsFailed",
    "MaxStepsExceededError",
    "RunContext",
    "ToolExecutionError",
    "current_run",
    "current_scope",
    "current_viewing_context",
    "declare_goal",
]
