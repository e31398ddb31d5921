"""The initial prompt: asking the user for a run's first message when it has none.

An agent given ``initial_prompt`` (a question) starts a run whose conversation holds no
message of the human's by asking that question through the UserIO. The reply becomes the
first user message, as typed, images included, and the turn starts at it; without a reply
the run stops instead of asking the LLM about nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from roboz.models import Empty, Message, Role, Stop, Str, StrImage
from roboz.runtime.io import interact_with_user
from roboz.tools import Tool

INITIAL_PROMPT = "initial_prompt"
NO_FIRST_MESSAGE = "(no message from the user)"
"""The Stop value of a run whose user gave no first message (a timeout, end of input)."""


def needs_first_message(messages: Sequence[Message]) -> bool:
    """True while the conversation holds no message of the human's (framework messages in
    the user's role carry a ``message_kind`` and do not count)."""
    return not any(m.role is Role.USER and m.message_kind is None for m in messages)


def make_initial_prompt_tool(question: str) -> Tool:
    """The tool that asks ``question``; the run records its reply as the user's message."""

    def ask(input: Empty, messages: list[Message]) -> Str | StrImage | Stop:
        reply = interact_with_user(question)
        return reply if reply is not None else Stop(value=NO_FIRST_MESSAGE)

    return Tool(
        name=INITIAL_PROMPT,
        instruction=f"Ask the user for the first message: {question}",
        input_type=Empty,
        output_types=(Str, Stop),  # StrImage is a Str
        func=ask,
        records_own_output=True,  # the reply is the user's message, not a tool result
    )


def first_message(reply: Str) -> Message:
    """The user's first message: the reply's text and, for a StrImage, its images."""
    images = reply.images if isinstance(reply, StrImage) else []
    return Message(role=Role.USER, content=reply.value, images=images)
