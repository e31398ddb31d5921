"""PermissionPolicy: allow / deny / ask rules over a base directory, compiled once.

Each operation gets one regular expression for the whole rule set: the alternatives are
grouped by verdict (named groups) in precedence order, so a single ``fullmatch`` tells which
verdict wins. A decision on a normalized absolute path costs one regex match.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from roboz_helper.file_policy import (
    FileMatcher,
    FilePolicy,
    FilePolicyError,
    FileRule,
    parse_file_policy,
)

from roboz.shed.guard._patterns import (
    absolute_pattern,
    components,
    covers_all_below,
    may_match_below,
    name_only_below,
    name_regex,
    pattern_regex,
)
from roboz.shed.models import ActionVerdict, Operation, PermissionRule


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


@dataclass(eq=False, frozen=True)
class PermissionPolicy:
    """Which operations on which paths are allowed, denied, or need the user's approval.

    ``base`` anchors relative patterns and relative command paths; it is resolved to its
    physical (symlink-free) path once, when the policy is made. Paths no rule matches get
    ``default_verdict``. Where rules of different verdicts match the same path, ``precedence``
    decides between allow and deny (deny by default); "ask" never overrides a deny, and an
    allow rule only overrides "ask" when ``precedence`` is allow.
    """

    base: Path
    default_verdict: ActionVerdict = ActionVerdict.deny
    # Any sequence of rules (a list, a tuple); kept as a tuple.
    allow: Sequence[PermissionRule] = ()
    deny: Sequence[PermissionRule] = ()
    ask: Sequence[PermissionRule] = ()
    precedence: ActionVerdict = ActionVerdict.deny
    _matcher: FileMatcher = field(init=False, repr=False)
    _bulk: dict[Operation, re.Pattern[str]] = field(init=False, repr=False)
    _order: tuple[ActionVerdict, ...] = field(init=False, repr=False)
    _name_matchers: dict[tuple[tuple[ActionVerdict, str], ...], re.Pattern[str]] = field(
        init=False, repr=False
    )
    _rules: tuple[_CompiledRule, ...] = field(init=False, repr=False)
    _base: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # The physical path: the walk compares against symlink-free paths.
        base = os.path.realpath(os.fspath(self.base))
        # Frozen: the compiled matchers must always describe the rules, so nothing changes
        # after construction (fields are set here through object.__setattr__ once).
        setattr_ = object.__setattr__
        setattr_(self, "base", Path(base))
        setattr_(self, "_base", base)
        for name in ("allow", "deny", "ask"):
            setattr_(self, name, tuple(getattr(self, name)))
        if self.precedence not in (ActionVerdict.allow, ActionVerdict.deny):
            raise ValueError("precedence must be ActionVerdict.allow or ActionVerdict.deny")
        order = (
            (ActionVerdict.deny, ActionVerdict.ask, ActionVerdict.allow)
            if self.precedence is ActionVerdict.deny
            else (ActionVerdict.allow, ActionVerdict.deny, ActionVerdict.ask)
        )
        setattr_(self, "_order", order)
        setattr_(self, "_name_matchers", {})
        groups = {
            ActionVerdict.allow: self.allow,
            ActionVerdict.deny: self.deny,
            ActionVerdict.ask: self.ask,
        }
        for name in ("allow", "deny", "ask"):
            for rule in getattr(self, name):
                if not isinstance(rule, PermissionRule):
                    raise TypeError(f"rules must be PermissionRule, got {rule!r}")

        # The decision itself is the helper's matcher (one for both enforcers); the bulk
        # matchers below only speed up deciding many paths at once, by the same patterns.
        def wire_rules(rules: tuple[PermissionRule, ...]) -> tuple[FileRule, ...]:
            return tuple(
                FileRule(pattern=rule.pattern,
                         operations=tuple(op.value for op in Operation if op in rule.operations))
                for rule in rules
            )  # fmt: skip

        wire = FilePolicy(
            base=base,
            default=self.default_verdict.value,
            precedence="allow" if self.precedence is ActionVerdict.allow else "deny",
            allow=wire_rules(tuple(self.allow)),
            deny=wire_rules(tuple(self.deny)),
            ask=wire_rules(tuple(self.ask)),
        )
        setattr_(self, "_matcher", FileMatcher(wire))
        compiled: list[_CompiledRule] = []
        setattr_(self, "_bulk", {})
        for operation in Operation:
            bulk: list[str] = []
            for verdict in order:
                patterns = [
                    absolute_pattern(rule.pattern, base)
                    for rule in groups[verdict]
                    if operation in rule.operations
                ]
                if patterns:
                    bulk.append(
                        f"(?P<{verdict.value}>"
                        f"{'|'.join(pattern_regex(p, multiline=True) for p in patterns)})"
                    )
            self._bulk[operation] = re.compile(
                "^(?:" + ("|".join(bulk) or "(?!)") + ")$", re.MULTILINE
            )
        for verdict, rules in groups.items():
            for rule in rules:
                parts = components(absolute_pattern(rule.pattern, base))
                compiled.append(_CompiledRule(verdict, rule.operations, parts))
        setattr_(self, "_rules", tuple(compiled))

    @property
    def base_path(self) -> str:
        return self._base

    def normalize(self, path: str | os.PathLike[str]) -> str:
        """An absolute, lexically normalized form of ``path`` (relative paths join base)."""
        return normalize(path, self._base)

    def decide(self, path: str, operation: Operation) -> ActionVerdict:
        """The verdict for a normalized absolute path (see ``normalize``): the helper's
        matcher's, the one the sandbox's view of a run's workdir is built from too."""
        return ActionVerdict(self._matcher.decide(path, operation.value))

    def verdict(self, path: str | os.PathLike[str], operation: Operation) -> ActionVerdict:
        """The verdict for any path (relative to base or absolute); no file system access."""
        return self.decide(self.normalize(path), operation)

    def verdicts_of(self, paths: list[str], operation: Operation) -> set[ActionVerdict]:
        """The set of verdicts over many normalized absolute paths, in one regex pass."""
        if not paths:
            return set()
        if any("\n" in path or path == "/" for path in paths):
            return {self.decide(path, operation) for path in paths}
        found: set[ActionVerdict] = set()
        matched = 0
        for match in self._bulk[operation].finditer("\n".join(paths)):
            found.add(ActionVerdict(match.lastgroup or self.default_verdict))
            matched += 1
        if matched < len(paths):
            found.add(self.default_verdict)
        return found

    def needs_paths_below(self, top: str, operation: Operation) -> bool:
        """Whether deciding below ``top`` needs whole paths (else names suffice)."""
        parts = components(top)
        return any(
            operation in rule.operations
            and may_match_below(rule.parts, parts)
            and not covers_all_below(rule.parts, parts)
            and name_only_below(rule.parts, parts) is None
            for rule in self._rules
        )

    def subtree_verdicts(
        self, top: str, rels: list[str] | None, operation: Operation, names: list[str]
    ) -> set[ActionVerdict]:
        """The verdicts of ``top + "/" + rel`` for every entry below directory ``top``.

        ``names`` are the entries' own names, ``rels`` their paths relative to ``top`` (only
        needed when ``needs_paths_below``). When every rule that can reach below ``top``
        covers all of it or looks only at the final name (``.../**/NAME``), names are
        matched instead of paths. A name with a newline in it counts as denied.
        """
        if not names:
            return set()
        parts = components(top)
        covering: list[ActionVerdict] = []
        by_name: list[tuple[ActionVerdict, str]] = []
        for rule in self._rules:
            if operation not in rule.operations or not may_match_below(rule.parts, parts):
                continue
            if covers_all_below(rule.parts, parts):
                covering.append(rule.verdict)
                continue
            name = name_only_below(rule.parts, parts)
            if name is None:
                if rels is None:
                    raise ValueError("these rules need whole paths (see needs_paths_below)")
                prefix = top.rstrip("/") + "/"
                return self.verdicts_of([prefix + rel for rel in rels], operation)
            by_name.append((rule.verdict, name))
        rank = {verdict: index for index, verdict in enumerate(self._order)}
        floor = min(covering, key=rank.__getitem__) if covering else None
        if not by_name:
            return {floor if floor is not None else self.default_verdict}
        joined = "\n".join(names)
        if joined.count("\n") != len(names) - 1:  # a name with a newline in it
            if rels is None:
                return {ActionVerdict.deny}
            prefix = top.rstrip("/") + "/"
            return self.verdicts_of([prefix + rel for rel in rels], operation)
        matcher = self._name_matcher(tuple(by_name))
        found: set[ActionVerdict] = set()
        matched = 0
        for match in matcher.finditer(joined):
            verdict = ActionVerdict(match.lastgroup or self.default_verdict)
            if floor is not None and rank[floor] < rank[verdict]:
                verdict = floor
            found.add(verdict)
            matched += 1
        if matched < len(names):
            found.add(floor if floor is not None else self.default_verdict)
        return found

    def _name_matcher(self, rules: tuple[tuple[ActionVerdict, str], ...]) -> re.Pattern[str]:
        cached = self._name_matchers.get(rules)
        if cached is None:
            groups: list[str] = []
            for verdict in self._order:
                names = [name_regex(name) for v, name in rules if v is verdict]
                if names:
                    groups.append(f"(?P<{verdict.value}>{'|'.join(names)})")
            cached = re.compile("^(?:" + "|".join(groups) + ")$", re.MULTILINE)
            self._name_matchers[rules] = cached
        return cached

    def verdicts_below(self, directory: str, operation: Operation) -> frozenset[ActionVerdict]:
        """Every verdict some strict descendant of ``directory`` could get (an over-estimate).

        ``{allow}`` means the whole subtree is allowed, so it needs no per-entry checks.
        """
        found = self._matcher.verdicts_below(directory, operation.value)
        return frozenset(ActionVerdict(verdict) for verdict in found)

    @property
    def file_policy(self) -> FilePolicy:
        """This policy in the file and wire format (what a SafeScripts run is narrowed by)."""
        return self._matcher.policy

    @classmethod
    def from_file_policy(cls, policy: FilePolicy) -> PermissionPolicy:
        """The PermissionPolicy of a decoded (and checked) file policy."""
        groups = {
            verdict: tuple(
                PermissionRule(
                    pattern=rule.pattern,
                    operations=frozenset(Operation(op) for op in rule.operations),
                )
                for rule in getattr(policy, verdict)
            )
            for verdict in ("allow", "deny", "ask")
        }
        return cls(
            base=Path(policy.base),
            default_verdict=ActionVerdict(policy.default),
            precedence=ActionVerdict(policy.precedence),
            allow=groups["allow"],
            deny=groups["deny"],
            ask=groups["ask"],
        )

    @classmethod
    def from_toml(cls, text: str | bytes, *, origin: str = "policy") -> PermissionPolicy:
        """A policy from TOML (the format of ``roboz_helper.file_policy``); raises
        ``FilePolicyError`` (a ValueError) naming ``origin`` and the field, e.g.
        ``policy: ask[0].pattern: pattern '**a': '**' must be a whole path component``.
        The base must be an existing directory."""
        policy = parse_file_policy(text, origin=origin)
        if not os.path.isdir(policy.base):
            raise FilePolicyError(f"{origin}: base: {policy.base} is not an existing directory")
        return cls.from_file_policy(policy)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> PermissionPolicy:
        """``from_toml`` of the file at ``path``; FilePolicyError when it cannot be read."""
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise FilePolicyError(
                f"cannot read policy {os.fspath(path)}: {error.strerror}"
            ) from None
        return cls.from_toml(data, origin=os.fspath(path))

    def rules_text(self) -> str:
        """A short human-readable summary, for instructions and messages (the MCP server
        tells its host what the policy allows)."""
        lines = [f"base: {self._base}", f"default: {self.default_verdict.value}"]
        for name, rules in (("allow", self.allow), ("deny", self.deny), ("ask", self.ask)):
            for rule in rules:
                ops = ",".join(sorted(op.value for op in rule.operations))
                lines.append(f"{name}: {rule.pattern} ({ops})")
        return "\n".join(lines)
