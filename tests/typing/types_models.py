"""Hints as wide as what runs: roles by name, rule collections as any sequence or set."""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

from roboz.models import Message, Role
from roboz.shed.models import Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy

# A role by its name is validated into the Role.
assert_type(Message(role="user", content="hi").role, Role)
Message(role=Role.ASSISTANT)
Message(role="robot")  # type: ignore[arg-type]
Message(role="user", contents="typo")  # type: ignore[call-arg]

# Operations: any iterable of Operation (kept as a frozenset).
rule = PermissionRule(pattern="src/**", operations={Operation.READ})
PermissionRule(pattern="src/**", operations=[Operation.READ, Operation.CREATE])
assert_type(rule.operations, frozenset[Operation])
PermissionRule(pattern="src/**", operations=["read"])  # type: ignore[list-item]

# Rule collections: any sequence of rules.
policy = PermissionPolicy(base=Path("."), allow=[rule], deny=(rule,), ask=[])
PermissionPolicy(base=Path("."), allow=rule)  # type: ignore[arg-type]
