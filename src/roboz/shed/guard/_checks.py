"""Checking one command's accesses against a policy: lexical first, then physical, then ask.

Order matters: the lexical path is checked before anything touches the file system (so a
denied path's existence never leaks); the walk then pins what the path physically resolves to
and checks that too; "ask" verdicts are collected and put to the user once, after every deny
has had its say (ask never overrides a deny).
"""

from __future__ import annotations

from dataclasses import dataclass

from roboz.runtime.events import Event, EventPipe
from roboz.runtime.io import ask_yes_no
from roboz.shed.guard._policy import PermissionPolicy
from roboz.shed.guard._resolve import Pinned, WalkError, resolve
from roboz.shed.models import ActionVerdict, Operation


@dataclass(frozen=True)
class PermissionDecided(Event):
    """A guarded tool's permission decision on one path."""

    tool: str = ""
    operation: str = ""
    path: str = ""
    verdict: str = ""
    reason: str = ""


class PermissionDenied(Exception):
    """The policy (or the user) refused an access; the message is safe to show the LLM."""


class AccessError(Exception):
    """An allowed access failed (missing file, wrong kind of file...); safe to show."""


class CommandGuard:
    """The permission checks of one command (or one patch, one PDF read)."""

    def __init__(
        self, policy: PermissionPolicy, *, tool: str, pipe: EventPipe | None = None
    ) -> None:
        self.policy = policy
        self.tool = tool
        self.pipe = pipe
        self.pending_asks: list[tuple[Operation, str]] = []

    def _emit(self, operation: Operation, path: str, verdict: ActionVerdict, reason: str) -> None:
        if self.pipe is not None:
            self.pipe.emit(
                PermissionDecided(
                    tool=self.tool,
                    operation=operation.value,
                    path=path,
                    verdict=verdict.value,
                    reason=reason,
                )
            )

    def _apply(self, verdict: ActionVerdict, operation: Operation, display: str, why: str) -> None:
        if verdict is ActionVerdict.deny:
            self._emit(operation, display, verdict, why)
            raise PermissionDenied(f"{operation.value} {display}: denied by policy{why}")
        if verdict is ActionVerdict.ask:
            if (operation, display) not in self.pending_asks:
                self.pending_asks.append((operation, display))
        else:
            self._emit(operation, display, verdict, why)

    def lexical(self, operation: Operation, display: str) -> str:
        """Check the path as written (no file system access); return its normalized form."""
        try:
            logical = self.policy.normalize(display)
        except ValueError as error:
            raise AccessError(f"{display!r}: {error}") from None
        self._apply(self.policy.decide(logical, operation), operation, display, "")
        return logical

    def physical(self, operation: Operation, physical: str, display: str) -> None:
        """Check a physical (symlink-free) path, e.g. a descendant found while walking."""
        self._apply(
            self.policy.decide(physical, operation),
            operation,
            display,
            " (the path resolves to a location the policy does not allow)"
            if physical != self.policy.normalize(display)
            else "",
        )

    def pin(self, operation: Operation, display: str, *, follow_final: bool = True) -> Pinned:
        """Lexical check, symlink-safe walk, physical check; the pinned result is what to use."""
        logical = self.lexical(operation, display)
        try:
            pinned = resolve(logical, follow_final=follow_final)
        except WalkError as error:
            # Where the walk failed may lie in a denied area: say "denied", not "missing".
            self.physical(operation, error.at, display)
            raise AccessError(f"{display}: {error.strerror}") from None
        try:
            self.physical(operation, pinned.physical, display)
        except PermissionDenied:
            pinned.close()
            raise
        return pinned

    def confirm(self) -> None:
        """Put the collected "ask" verdicts to the user once; refusing denies the command."""
        if not self.pending_asks:
            return
        asks, self.pending_asks = self.pending_asks, []
        listing = ", ".join(f"{op.value} {path}" for op, path in asks)
        approved = ask_yes_no(f"{self.tool} wants to {listing}. Allow?")
        for operation, path in asks:
            self._emit(
                operation,
                path,
                ActionVerdict.allow if approved else ActionVerdict.deny,
                "user approved" if approved else "user refused",
            )
        if not approved:
            raise PermissionDenied(f"{listing}: the user did not approve")
