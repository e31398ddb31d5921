"""What the LLM sees of a message once it has been shown a number of times.

Truncation never touches the stored conversation: the agent applies it only when it renders
messages for an LLM call.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    """How much of a message stays visible once its threshold is reached."""

    LIGHT = "light"
    """Keep the first ``max_chars`` characters; images stay attached."""
    STUB = "stub"
    """Replace the content with a short stub naming the caller; images are dropped."""
    REMOVE = "remove"
    """Drop the message from what the LLM sees."""


class Truncation(BaseModel):
    """Truncate a message after it has been shown to the LLM ``threshold`` times.

    ``threshold=0`` truncates from the first showing; ``threshold=1`` shows the message once in
    full and truncates it on every later call.
    """

    model_config = ConfigDict(frozen=True)

    threshold: int = Field(default=0, ge=0)
    severity: Severity = Severity.LIGHT
    max_chars: int = Field(default=200, ge=0, description="Characters kept by LIGHT truncation.")

    def applies(self, times_shown: int) -> bool:
        return times_shown >= self.threshold
