"""Asking the user: the ask_user action of steerable agents, and silence for autonomous ones."""

from __future__ import annotations

from roboz.models import Empty, Message, Str, StrImage
from roboz.runtime.io import UserIO, interact_with_user
from roboz.tools import Tool, tool


class UserQuestion(Empty):
    question: str


def make_ask_user_tool() -> Tool:
    @tool(name="ask_user")
    def ask_user(input: UserQuestion, messages: list[Message]) -> Str | StrImage:
        """Ask the user a question and wait for the reply (text, possibly with images)."""
        reply = interact_with_user(input.question)
        return reply if reply is not None else Str(value="(no reply from the user)")

    return ask_user


class NoInputUserIO:
    """Autonomous agents cannot ask for input: requests get None, notifications still go out."""

    def __init__(self, inner: UserIO) -> None:
        self._inner = inner

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage | None:
        return None

    def notify(self, message: str) -> None:
        self._inner.notify(message)
