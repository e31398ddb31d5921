"""Errors that end an agent run. Each carries the conversation so far: nothing is lost."""

from __future__ import annotations

from roboz.models import Message


class AgentConfigurationError(ValueError):
    """The agent's tools, chains, defaults or skills are declared inconsistently."""


class AgentRunError(RuntimeError):
    """A run ended with an error; ``messages`` holds the conversation up to that point."""

    def __init__(self, message: str, *, messages: list[Message] | None = None) -> None:
        super().__init__(message)
        self.messages: list[Message] = messages if messages is not None else []


class ChainConflictError(AgentRunError):
    """More than one chained child had a true condition for the same output."""


class ToolExecutionError(AgentRunError):
    """A tool raised; ``tool`` names it and the original exception is the cause."""

    def __init__(self, message: str, *, tool: str, messages: list[Message] | None = None) -> None:
        super().__init__(message, messages=messages)
        self.tool = tool


class AgentReplyError(AgentRunError):
    """The LLM kept replying with unusable actions after every correction."""


class AgentCancelledError(AgentRunError):
    """``Agent.cancel()`` was called; the run stopped before its next step (or LLM reply)."""


class MaxStepsExceededError(AgentRunError):
    """The run took more steps than ``max_steps`` without a Stop."""
