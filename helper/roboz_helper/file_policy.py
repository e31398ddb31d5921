"""File-permission policies: the ONE format and the ONE decision of "may this path be read,
created, deleted?" for both enforcers.

The guarded file tools (``roboz.shed.sandbox.PermissionPolicy``, in-process) and the sandbox
(the helper's view of a run's workdir) both decide through :class:`FileMatcher`, compiled
from a :class:`FilePolicy`. The same Struct is the TOML file format (``PermissionPolicy.
from_file``, ``roboz mcp serve --policy``, a helper profile's ``file_policy``) and the wire
form a client sends with a run (``protocol.RunScript.file_policy``), so there is one parser
and one matcher, and the two tools cannot disagree about a path.

```toml
base = "/home/me/project"     # relative patterns are below it
default = "deny"              # verdict where no rule matches: allow | deny | ask
precedence = "deny"           # which of allow and deny wins where both match

[[allow]]
pattern = "**"
operations = ["read"]         # read | create | delete; all three when left out

[[deny]]
pattern = "**/.env"
```

Standard library and msgspec only: the helper's trusted base imports this.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import msgspec

from roboz_helper.file_patterns import (
    GLOBSTAR,
    absolute_pattern,
    components,
    covers_all_below,
    may_match_below,
    pattern_regex,
)

Verdict = Literal["allow", "deny", "ask"]
OperationName = Literal["read", "create", "delete"]
OPERATIONS: Final[tuple[OperationName, ...]] = ("read", "create", "delete")
# Most restrictive first: composing policies keeps the first of these that any of them says.
RESTRICTIVENESS: Final[tuple[Verdict, ...]] = ("deny", "ask", "allow")


class FilePolicyError(ValueError):
    """A file policy is unreadable, malformed or meaningless; the message names the field."""


class FileRule(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pattern: str
    operations: tuple[OperationName, ...] = OPERATIONS


class FilePolicy(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    base: str
    default: Verdict = "deny"
    precedence: Literal["allow", "deny"] = "deny"
    allow: tuple[FileRule, ...] = ()
    deny: tuple[FileRule, ...] = ()
    ask: tuple[FileRule, ...] = ()


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def _field_error(error: msgspec.MsgspecError, prefix: str) -> str:
    """msgspec's 'Expected ... - at `$.allow[0].pattern`' as 'allow[0].pattern: Expected ...'."""
    match = _AT.match(str(error))
    assert match is not None  # the pattern matches any string
    path = (prefix + (match["path"] or "")).lstrip(".")
    return f"{path or '(top level)'}: {match['msg']}"


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable rule pattern, or None."""
    if not pattern or "\x00" in pattern:
        return "a rule pattern must be a non-empty string without NUL bytes"
    if any(char in pattern for char in "?[]"):
        return f"rule pattern {pattern!r}: '?' and brackets are not supported"
    if any("**" in part and part != "**" for part in pattern.split("/")):
        return f"pattern {pattern!r}: '**' must be a whole path component"
    return None


def check_file_policy(policy: FilePolicy, where: str = "") -> None:
    """Meaning beyond types: an absolute base, usable patterns, at least one operation per
    rule. ``where`` prefixes every field path (``profiles.ci.file_policy.``)."""
    base = policy.base
    if "\x00" in base or not base.startswith("/"):
        raise FilePolicyError(f"{where}base: must be an absolute path, got {base!r}")
    for verdict in ("allow", "deny", "ask"):
        rules: tuple[FileRule, ...] = getattr(policy, verdict)
        for index, rule in enumerate(rules):
            problem = pattern_problem(rule.pattern)
            if problem is not None:
                raise FilePolicyError(f"{where}{verdict}[{index}].pattern: {problem}")
            if not rule.operations:
                raise FilePolicyError(
                    f"{where}{verdict}[{index}].operations: name at least one operation"
                )


def parse_file_policy(text: str | bytes, *, origin: str = "file policy") -> FilePolicy:
    """Decode and check policy TOML; raises FilePolicyError naming ``origin`` and the field."""
    try:
        policy = msgspec.toml.decode(text, type=FilePolicy, strict=True)
    except msgspec.ValidationError as error:
        raise FilePolicyError(f"{origin}: {_field_error(error, '')}") from None
    except msgspec.DecodeError as error:
        raise FilePolicyError(f"{origin}: invalid TOML: {error}") from None
    try:
        check_file_policy(policy)
    except FilePolicyError as error:
        raise FilePolicyError(f"{origin}: {error}") from None
    return policy


def load_file_policy(path: str | os.PathLike[str]) -> FilePolicy:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as error:
        raise FilePolicyError(
            f"cannot read file policy {os.fspath(path)}: {error.strerror}"
        ) from None
    return parse_file_policy(data, origin=os.fspath(path))


@dataclass(frozen=True)
class CompiledRule:
    verdict: Verdict
    operations: frozenset[str]
    parts: tuple[str, ...]


class FileMatcher:
    """A FilePolicy compiled once: one regular expression per operation for the whole rule
    set, alternatives grouped by verdict (named groups) in precedence order, so a single
    ``fullmatch`` tells which verdict wins. ``base`` is resolved to its physical path, as
    both enforcers compare physical (symlink-free) paths."""

    def __init__(self, policy: FilePolicy) -> None:
        check_file_policy(policy)
        self.policy = policy
        self.base = os.path.realpath(policy.base)
        self.default: Verdict = policy.default
        self.order: tuple[Verdict, ...] = (
            ("deny", "ask", "allow") if policy.precedence == "deny" else ("allow", "deny", "ask")
        )
        groups: dict[Verdict, tuple[FileRule, ...]] = {
            "allow": policy.allow,
            "deny": policy.deny,
            "ask": policy.ask,
        }
        self.matchers: dict[str, re.Pattern[str]] = {}
        for operation in OPERATIONS:
            alternatives = []
            for verdict in self.order:
                patterns = [
                    pattern_regex(absolute_pattern(rule.pattern, self.base))
                    for rule in groups[verdict]
                    if operation in rule.operations
                ]
                if patterns:
                    alternatives.append(f"(?P<{verdict}>{'|'.join(patterns)})")
            self.matchers[operation] = re.compile("|".join(alternatives) or "(?!)", re.DOTALL)
        self._below: dict[tuple[str, str], frozenset[Verdict]] = {}
        self._named: dict[str, frozenset[str] | None] = {}
        self.rules: tuple[CompiledRule, ...] = tuple(
            CompiledRule(verdict, frozenset(rule.operations),
                         components(absolute_pattern(rule.pattern, self.base)))
            for verdict, rules in groups.items()
            for rule in rules
        )  # fmt: skip

    def decide(self, path: str, operation: str) -> Verdict:
        """The verdict for a normalized absolute path."""
        match = self.matchers[operation].fullmatch(path if path != "/" else "")
        if match is None or match.lastgroup is None:
            return self.default
        group = match.lastgroup
        return "allow" if group == "allow" else "deny" if group == "deny" else "ask"

    @classmethod
    def of(cls, policy: FilePolicy) -> FileMatcher:
        """The compiled matcher of ``policy``, shared by every run that sends the same one
        (an agent sends its policy with each run): compiling and the per-directory answers
        below are then paid once, not per run."""
        matcher = _MATCHERS.get(policy)
        if matcher is None:
            if len(_MATCHERS) >= _CACHED_MATCHERS:
                _MATCHERS.clear()
            matcher = _MATCHERS[policy] = cls(policy)
        return matcher

    def verdicts_below(self, directory: str, operation: str) -> frozenset[Verdict]:
        """Every verdict some strict descendant of ``directory`` could get (an over-estimate;
        ``{"allow"}`` means the whole subtree is allowed). A rule that covers the whole
        subtree decides it unless a rule of higher precedence matches, so rules of lower
        precedence than the best covering one cannot win there and are left out. A pure
        function of the rules and the path string, so it is remembered."""
        key = (directory, operation)
        found = self._below.get(key)
        if found is None:
            if len(self._below) >= _CACHED_ANSWERS:
                self._below.clear()
            found = self._below[key] = self._verdicts_below(directory, operation)
        return found

    def named_below(self, directory: str) -> frozenset[str] | None:
        """The only child names a rule can tell apart below ``directory``, when every rule
        that reaches below it without covering all of it names its next component literally
        (``secrets/**`` names ``secrets``); None when one has a wildcard there (``*.key``,
        ``**/.env``). Remembered like verdicts_below."""
        if directory in self._named:
            return self._named[directory]
        if len(self._named) >= _CACHED_ANSWERS:
            self._named.clear()
        parts = components(directory)
        depth = len(parts)
        names: set[str] = set()
        answer: frozenset[str] | None = None
        for rule in self.rules:
            pattern = rule.parts
            if not may_match_below(pattern, parts) or covers_all_below(pattern, parts):
                continue
            if len(pattern) <= depth or GLOBSTAR in pattern[:depth] or "*" in pattern[depth]:
                break
            names.add(pattern[depth])
        else:
            answer = frozenset(names)
        self._named[directory] = answer
        return answer

    def _verdicts_below(self, directory: str, operation: str) -> frozenset[Verdict]:
        parts = components(directory)
        rank = {verdict: index for index, verdict in enumerate(self.order)}
        reaching: list[Verdict] = []
        floor: Verdict | None = None
        for rule in self.rules:
            if operation not in rule.operations or not may_match_below(rule.parts, parts):
                continue
            reaching.append(rule.verdict)
            if covers_all_below(rule.parts, parts) and (
                floor is None or rank[rule.verdict] < rank[floor]
            ):
                floor = rule.verdict
        if floor is None:
            return frozenset([*reaching, self.default])
        return frozenset([floor, *(v for v in reaching if rank[v] < rank[floor])])


_CACHED_MATCHERS = 64
_CACHED_ANSWERS = 4096
_MATCHERS: dict[FilePolicy, FileMatcher] = {}


def strictest(verdicts: Iterable[Verdict]) -> Verdict:
    """Composition of policies: a path is allowed only where every policy allows it."""
    seen = set(verdicts)
    return next((verdict for verdict in RESTRICTIVENESS if verdict in seen), "allow")


def composed_verdict(matchers: Sequence[FileMatcher], path: str, operation: str) -> Verdict:
    """What the composition of ``matchers`` says about ``path`` (allow with none)."""
    return strictest(matcher.decide(path, operation) for matcher in matchers)


def normalize(path: str, base: str) -> str:
    """``path`` made absolute against ``base`` and lexically normalized (``..`` collapsed)."""
    if "\x00" in path:
        raise ValueError("paths must not contain NUL bytes")
    joined = path if path.startswith("/") else posixpath.join(base, path)
    normal = posixpath.normpath(joined)
    return "/" if normal.strip("/") == "" else normal.replace("//", "/")


def rules_text(policy: FilePolicy) -> str:
    """A short human-readable summary (``check-policy``, ``show_agent_info``)."""
    lines = [f"base: {policy.base}", f"default: {policy.default}"]
    if policy.precedence != "deny":
        lines.append(f"precedence: {policy.precedence}")
    for name in ("allow", "deny", "ask"):
        for rule in getattr(policy, name):
            lines.append(f"{name}: {rule.pattern} ({','.join(sorted(rule.operations))})")
    return "\n".join(lines)
