"""The ``stop`` tool: lets the LLM end the run with a result."""

from __future__ import annotations

from roboz.models import Message, Stop
from roboz.tools.tool import tool


@tool(pure=True)
def stop(input: Stop, messages: list[Message]) -> Stop:
    """End the run. Put the final answer or result in `value`."""
    return Stop(value=input.value)
