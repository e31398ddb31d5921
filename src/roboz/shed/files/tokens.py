"""The run_file_command input: one ordered array of ``[value, tag]`` pairs."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator

from roboz.models import Empty


class Tag(StrEnum):
    CMD = "CMD"
    """A command name: cat, grep, gio (followed by ARG trash) ..."""
    FLG = "FLG"
    """An option, e.g. -n or --ignore-case; its value (if any) is the next ARG or PTH."""
    ARG = "ARG"
    """A non-path value: a search pattern, a number, a name glob for find."""
    PTH = "PTH"
    """A path, relative to the policy base or absolute."""
    CTL = "CTL"
    """A control operator: &&, ||, ; or |."""


Token = tuple[str, Tag]


class FileCommandInput(Empty):
    """File commands as ``[value, tag]`` pairs, e.g.
    ``[["wc", "CMD"], ["-l", "FLG"], ["notes/todo.md", "PTH"]]``."""

    value: list[Token] = Field(
        ...,
        description=(
            "Ordered [value, tag] pairs. Tags: CMD command, FLG option, ARG value, PTH path, "
            "CTL control operator (&&, ||, ;, |)."
        ),
        min_length=1,
    )

    @field_validator("value")
    @classmethod
    def _no_nul(cls, value: list[Token]) -> list[Token]:
        for text, _tag in value:
            if "\x00" in text:
                raise ValueError("values must not contain NUL bytes")
        return value
