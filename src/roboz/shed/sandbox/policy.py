"""PermissionPolicy: allow / deny / ask rules over a base directory, compiled once.

Each operation gets one regular expression for the whole rule set: the alternatives are
grouped by verdict (named groups) in precedence order, so a single ``fullmatch`` tells which
verdict wins. A decision on a normalized absolute path costs one regex match.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox.patterns import (
    absolute_pattern,
    components,
    covers_all_below,
    may_match_below,
    pattern_regex,
)


def normalize(path: str | os.PathLike[str], base: str) -> str:
    """``path`` made absolute against ``base`` and lexically normalized (``..`` collapsed)."""
    text = os.fspath(path)
    if "\x00" in text:
        raise ValueError("paths must not contain NUL bytes")
    joined = text if text.startswith("/") else posixpath.join(base, text)
    normal = posixpath.normpath(joined)
    return "/" if normal.startswith("//") and normal.strip("/") == "" else normal.replace("//", "/")


@dataclass(frozen=True)
class _CompiledRule:
    verdict: ActionVerdict
    operations: frozenset[Operation]
    parts: tuple[str, ...]


@dataclass(eq=False)
class PermissionPolicy:
    """Which operations on which paths are allowed, denied, or need the user's approval.

    ``base`` anchors relative patterns and relative command paths. Paths no rule matches get
    ``default_verdict``. Where rules of different verdicts match the same path, ``precedence``
    decides between allow and deny (deny by default); "ask" never overrides a deny, and an
    allow rule only overrides "ask" when ``precedence`` is allow.
    """

    base: Path
    default_verdict: ActionVerdict = ActionVerdict.deny
    allow: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()
    ask: tuple[PermissionRule, ...] = ()
    precedence: ActionVerdict = ActionVerdict.deny
    _matchers: dict[Operation, re.Pattern[str]] = field(init=False, repr=False)
    _rules: tuple[_CompiledRule, ...] = field(init=False, repr=False)
    _base: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        base = os.path.abspath(os.fspath(self.base))
        self.base = Path(base)
        self._base = base
        self.allow, self.deny, self.ask = tuple(self.allow), tuple(self.deny), tuple(self.ask)
        if self.precedence not in (ActionVerdict.allow, ActionVerdict.deny):
            raise ValueError("precedence must be ActionVerdict.allow or ActionVerdict.deny")
        order = (
            (ActionVerdict.deny, ActionVerdict.ask, ActionVerdict.allow)
            if self.precedence is ActionVerdict.deny
            else (ActionVerdict.allow, ActionVerdict.deny, ActionVerdict.ask)
        )
        groups = {
            ActionVerdict.allow: self.allow,
            ActionVerdict.deny: self.deny,
            ActionVerdict.ask: self.ask,
        }
        compiled: list[_CompiledRule] = []
        self._matchers = {}
        for operation in Operation:
            alternatives = []
            for verdict in order:
                regexes = []
                for rule in groups[verdict]:
                    if not isinstance(rule, PermissionRule):
                        raise TypeError(f"rules must be PermissionRule, got {rule!r}")
                    if operation in rule.operations:
                        regexes.append(pattern_regex(absolute_pattern(rule.pattern, base)))
                if regexes:
                    alternatives.append(f"(?P<{verdict.value}>{'|'.join(regexes)})")
            self._matchers[operation] = re.compile("|".join(alternatives) or "(?!)", re.DOTALL)
        for verdict, rules in groups.items():
            for rule in rules:
                parts = components(absolute_pattern(rule.pattern, base))
                compiled.append(_CompiledRule(verdict, rule.operations, parts))
        self._rules = tuple(compiled)

    @property
    def base_path(self) -> str:
        return self._base

    def normalize(self, path: str | os.PathLike[str]) -> str:
        """An absolute, lexically normalized form of ``path`` (relative paths join base)."""
        return normalize(path, self._base)

    def decide(self, path: str, operation: Operation) -> ActionVerdict:
        """The verdict for a normalized absolute path (see ``normalize``)."""
        match = self._matchers[operation].fullmatch(path if path != "/" else "")
        if match is None:
            return self.default_verdict
        return ActionVerdict(match.lastgroup or self.default_verdict)

    def verdict(self, path: str | os.PathLike[str], operation: Operation) -> ActionVerdict:
        """The verdict for any path (relative to base or absolute); no file system access."""
        return self.decide(self.normalize(path), operation)

    def verdicts_below(self, directory: str, operation: Operation) -> frozenset[ActionVerdict]:
        """Every verdict some strict descendant of ``directory`` could get (an over-estimate).

        ``{allow}`` means the whole subtree is allowed, so it needs no per-entry checks.
        """
        parts = components(directory)
        found: set[ActionVerdict] = set()
        covered = False
        for rule in self._rules:
            if operation not in rule.operations:
                continue
            if may_match_below(rule.parts, parts):
                found.add(rule.verdict)
            if not covered and covers_all_below(rule.parts, parts):
                covered = True
        if not covered:
            found.add(self.default_verdict)
        return frozenset(found)

    def rules_text(self) -> str:
        """A short human-readable summary, for instructions and messages."""
        lines = [f"base: {self._base}", f"default: {self.default_verdict.value}"]
        for name, rules in (("allow", self.allow), ("deny", self.deny), ("ask", self.ask)):
            for rule in rules:
                ops = ",".join(sorted(op.value for op in rule.operations))
                lines.append(f"{name}: {rule.pattern} ({ops})")
        return "\n".join(lines)


def rules(patterns: Iterable[str], *operations: Operation) -> tuple[PermissionRule, ...]:
    """Convenience: one rule per pattern with the given operations (all if none given)."""
    ops = frozenset(operations) if operations else frozenset(Operation)
    return tuple(PermissionRule(pattern=pattern, operations=ops) for pattern in patterns)
