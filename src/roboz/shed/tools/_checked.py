"""The check-then-run pair every guarded Shed tool is made of.

The LLM calls the checking tool. It validates the request and either answers at once (what
to fix) or returns an ``Accepted`` request, which its chained executor picks up and carries
out under the permission policy. The accepted request is plumbing, so the LLM never sees it;
the executor is passive and runs only after its checker. Executors report every failure as
a result the LLM can act on: a denial, an expected failure, or an internal error, never an
exception that would end the agent's run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic.json_schema import SkipJsonSchema

from roboz.models import Severity, Str, Truncation
from roboz.shed.guard import AccessError, PermissionDenied
from roboz.tools import Factory, factory

T = TypeVar("T")

HIDDEN = Truncation(threshold=0, severity=Severity.REMOVE)
"""Removed from what the LLM sees before its next call."""


class Accepted(Str):
    """A request that passed its checks, on its way to the guarded executor."""

    truncation: SkipJsonSchema[Truncation | None] = HIDDEN


class _IsAccepted:
    """The executor's chain condition; its repr is what show_agent_info prints."""

    def __init__(self, kind: type[Accepted]) -> None:
        self.kind = kind

    def __call__(self, output: object) -> bool:
        return isinstance(output, self.kind)

    def __repr__(self) -> str:
        return f"the output is a {self.kind.__name__}"


def executor(
    checker: Factory[Any], accepted: type[Accepted]
) -> Callable[[Callable[..., Any]], Factory[Any]]:
    """Decorate the executor of ``checker``: chained to it, it runs what it ``accepted``."""
    return factory(chained_to=checker, chain_condition=_IsAccepted(accepted))


REFUSAL = re.compile(r"^[a-z_]+ (DENIED|failed): ")
"""How the text of every ``Refused`` begins (``run_guarded`` writes them all)."""


@dataclass(frozen=True)
class Refused:
    """Why guarded work did not happen, as the text the LLM gets."""

    text: str


def run_guarded(
    tool: str,
    path: str,
    work: Callable[[], T],
    *,
    expected: tuple[type[Exception], ...] = (),
    unchanged: str = "",
) -> T | Refused:
    """``work()``, or why it failed: denied by the policy or the user, an ``AccessError`` or
    ``expected`` error, an OS error on ``path``, or an internal error. ``unchanged`` is added
    to the known failures (e.g. "; nothing was changed")."""
    known: tuple[type[Exception], ...] = (AccessError, *expected)
    try:
        return work()
    except PermissionDenied as error:
        return Refused(f"{tool} DENIED: {error}{unchanged}")
    except known as error:
        return Refused(f"{tool} failed: {error}{unchanged}")
    except OSError as error:
        return Refused(f"{tool} failed: {path}: {error.strerror or error}{unchanged}")
    except Exception as error:  # a bug must not take the agent's whole run down
        return Refused(f"{tool} failed: internal error ({type(error).__name__})")
