"""Plain data the thread API exchanges: client-side tool specs and model profiles."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ClientToolSpec(BaseModel):
    """A tool the client runs itself.

    The model is offered it like any other tool, but the server never executes it: when the
    model calls it, the thread waits in CLIENT_TOOL_TURN for the client to submit the result.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    """JSON Schema of the tool's input."""


class ModelProfileResponse(BaseModel):
    """A model profile a thread can use, as listed to clients."""

    id: str
    """Identifier such as "standard" or "advanced"."""
    label: str
    """Name to show people."""
    description: str
    is_default: bool = False
    """True for the profile new threads get when none is chosen."""
