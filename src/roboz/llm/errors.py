"""Errors raised by the LLM layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roboz.models import Message


class LLMError(RuntimeError):
    """Base class of LLM-layer failures."""


class MockScriptExhaustedError(LLMError):
    """A MockLLMEndpoint was asked for more replies than its script holds."""


class LLMReplyError(LLMError):
    """The LLM kept replying with something that could not be used, after every repair try."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        last_reply: str,
        reason: str = "",
        exchange: list[Message] | None = None,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_reply = last_reply
        self.reason = reason
        self.exchange: list[Message] = exchange if exchange is not None else []
        """Rejected replies and corrections, ending with the last rejected reply."""
