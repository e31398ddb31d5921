"""A per-command deadline for work done in Python (walks, copies, removals, reads).

The engine sets it around each command; long loops call ``check_deadline()``, which raises
CommandTimeout once the command's time is up. External programs have their own deadline in
``run_binary``.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Generator

_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "roboz_shed_deadline", default=None
)


class CommandTimeout(Exception):
    """The command ran out of time; work already done (files written) stays done."""


@contextlib.contextmanager
def deadline(seconds: float) -> Generator[None, None, None]:
    token = _deadline.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def check_deadline() -> None:
    current = _deadline.get()
    if current is not None and time.monotonic() > current[0]:
        raise CommandTimeout(
            f"timed out after {current[1]:g} s and was stopped; changes made before that stay"
        )
