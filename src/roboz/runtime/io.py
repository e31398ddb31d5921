"""Talking to the person behind an agent: notifications, prompts and typed replies."""

from __future__ import annotations

import contextlib
import contextvars
import select
import sys
from collections.abc import Generator
from typing import Protocol, runtime_checkable

from roboz.models import Str, StrImage
from roboz.runtime.events import UserNotified, UserPrompted, emit


@runtime_checkable
class UserIO(Protocol):
    """A host adapter. ``request_input`` returns the user's typed reply, or None on timeout."""

    def request_input(
        self, prompt: str, *, timeout: float | None = None
    ) -> Str | StrImage | None: ...

    def notify(self, message: str) -> None: ...


class CliUserIO:
    """Terminal adapter: prints notifications, reads a line of input wrapped in Str."""

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | StrImage | None:
        print(prompt, end="" if prompt.endswith((" ", ":")) else ": ", flush=True)
        if timeout is not None:
            try:
                ready, _, _ = select.select([sys.stdin], [], [], timeout)
            except (OSError, ValueError):  # stdin is not selectable (e.g. replaced in tests)
                ready = [sys.stdin]
            if not ready:
                print()
                return None
        line = sys.stdin.readline()
        if line == "":
            return None
        return Str(value=line.rstrip("\n"))

    def notify(self, message: str) -> None:
        print(message, flush=True)


_current_io: contextvars.ContextVar[UserIO | None] = contextvars.ContextVar(
    "roboz_user_io", default=None
)


def current_user_io() -> UserIO:
    """The adapter bound with ``use_user_io``, or the terminal when none is."""
    return _current_io.get() or CliUserIO()


def bound_user_io() -> UserIO | None:
    """The adapter bound with ``use_user_io``, or None."""
    return _current_io.get()


@contextlib.contextmanager
def use_user_io(user_io: UserIO | None) -> Generator[None, None, None]:
    token = _current_io.set(user_io)
    try:
        yield
    finally:
        _current_io.reset(token)


def interact_with_user(
    message: str, *, with_reply: bool = True, timeout: float | None = None
) -> Str | StrImage | None:
    """Tell the user something, and by default wait for a reply.

    Returns the reply (``Str`` or ``StrImage``), or None for notifications and timeouts.
    """
    user_io = current_user_io()
    if not with_reply:
        emit(UserNotified(message=message))
        user_io.notify(message)
        return None
    emit(UserPrompted(prompt=message))
    return user_io.request_input(message, timeout=timeout)


def ask_yes_no(question: str, *, timeout: float | None = None) -> bool:
    """A yes/no approval; only the reply's text counts, attachments are ignored."""
    reply = interact_with_user(f"{question} [y/N]", timeout=timeout)
    return reply is not None and reply.value.strip().lower() in ("y", "yes")
