"""Permission vocabulary shared by every guarded Shed tool."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ActionVerdict(StrEnum):
    """What a policy says about one operation on one path."""

    allow = "allow"
    deny = "deny"
    ask = "ask"


class Operation(StrEnum):
    """What a command does to a path: read it (or list it), create/write it, delete it."""

    READ = "read"
    CREATE = "create"
    DELETE = "delete"


ALL_OPERATIONS: frozenset[Operation] = frozenset(Operation)


class PermissionRule(BaseModel):
    """A glob ``pattern`` (relative to the policy base, or absolute) and the operations it covers.

    ``*`` matches within one path component, ``**`` any number of components; ``dir/**`` covers
    ``dir`` itself and everything below it. ``?`` and brackets are not supported.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pattern: str
    operations: frozenset[Operation] = Field(default=ALL_OPERATIONS)

    if TYPE_CHECKING:
        # Validation takes any iterable of operations (a set, a list) into the frozenset.
        def __init__(
            self, *, pattern: str, operations: Iterable[Operation] = ALL_OPERATIONS
        ) -> None: ...

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, pattern: str) -> str:
        if not pattern or "\x00" in pattern:
            raise ValueError("a rule pattern must be a non-empty string without NUL bytes")
        if any(char in pattern for char in "?[]"):
            raise ValueError(f"rule pattern {pattern!r}: '?' and brackets are not supported")
        return pattern
