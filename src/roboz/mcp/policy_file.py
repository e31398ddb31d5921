"""Permission policy files of ``roboz mcp serve``: TOML decoded strictly into a PermissionPolicy.

Like the helper's policies, decoding rejects unknown keys and wrong types, and validation
rejects what decodes but makes no sense (a relative or missing base, a bad pattern); every
error names the field, e.g. ``allow[1].operations[0]``, and nothing is served.

```toml
base = "/home/me/project"     # relative patterns and paths are below it
default = "deny"              # verdict where no rule matches: allow | deny | ask
precedence = "deny"           # which of allow and deny wins where both match

[[allow]]
pattern = "**"
operations = ["read"]         # read | create | delete; all three when left out

[[deny]]
pattern = "**/.env"
```
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import msgspec
from pydantic import ValidationError

from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy


class PolicyFileError(ValueError):
    """A policy file is unreadable, malformed or meaningless; the message names the field."""


class _Rule(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pattern: str
    operations: tuple[Literal["read", "create", "delete"], ...] = ("read", "create", "delete")


class _PolicyFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    base: str
    default: Literal["allow", "deny", "ask"] = "deny"
    precedence: Literal["allow", "deny"] = "deny"
    allow: tuple[_Rule, ...] = ()
    deny: tuple[_Rule, ...] = ()
    ask: tuple[_Rule, ...] = ()


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def _field_error(error: msgspec.MsgspecError) -> str:
    """msgspec's 'Expected ... - at `$.allow[0].pattern`' as 'allow[0].pattern: Expected ...'."""
    match = _AT.match(str(error))
    assert match is not None  # the pattern matches any string
    path = (match["path"] or "").lstrip(".")
    return f"{path or '(top level)'}: {match['msg']}"


def parse_policy_file(text: str | bytes, *, origin: str = "policy") -> PermissionPolicy:
    """Decode and check policy TOML; raises PolicyFileError naming the offending field."""
    try:
        raw = msgspec.toml.decode(text, type=_PolicyFile, strict=True)
    except msgspec.ValidationError as error:
        raise PolicyFileError(f"{origin}: {_field_error(error)}") from None
    except msgspec.DecodeError as error:
        raise PolicyFileError(f"{origin}: invalid TOML: {error}") from None
    if not raw.base.startswith("/"):
        raise PolicyFileError(f"{origin}: base: must be an absolute path, got {raw.base!r}")
    if not os.path.isdir(raw.base):
        raise PolicyFileError(f"{origin}: base: {raw.base} is not an existing directory")
    groups: dict[str, tuple[PermissionRule, ...]] = {}
    for verdict in ("allow", "deny", "ask"):
        rules: list[PermissionRule] = []
        for index, rule in enumerate(getattr(raw, verdict)):
            try:
                rules.append(
                    PermissionRule(
                        pattern=rule.pattern,
                        operations=frozenset(Operation(op) for op in rule.operations),
                    )
                )
            except ValidationError as error:
                problem = "; ".join(item["msg"] for item in error.errors())
                raise PolicyFileError(
                    f"{origin}: {verdict}[{index}].pattern: {problem.removeprefix('Value error, ')}"
                ) from None
            if not rule.operations:
                raise PolicyFileError(
                    f"{origin}: {verdict}[{index}].operations: name at least one operation"
                )
        groups[verdict] = tuple(rules)
    return PermissionPolicy(
        base=Path(raw.base),
        default_verdict=ActionVerdict(raw.default),
        precedence=ActionVerdict(raw.precedence),
        allow=groups["allow"],
        deny=groups["deny"],
        ask=groups["ask"],
    )


def load_policy_file(path: str | os.PathLike[str]) -> PermissionPolicy:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise PolicyFileError(f"cannot read policy {os.fspath(path)}: {error.strerror}") from None
    return parse_policy_file(data, origin=os.fspath(path))
