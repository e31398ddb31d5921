"""What the user was looking at (informational) and which data an agent may analyse (a window)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError


class ClientViewingContext(BaseModel):
    """The client's screen state when the user wrote a message.

    It lets the agent resolve words like "this dataset" or "the view I have open" without the
    user spelling out ids. Nothing here is enforced or used for authorization; for a hard
    analysis window see :class:`AnalysisScope`.
    """

    dataset_ids: list[str] = Field(default_factory=list)
    """Datasets on screen or selected."""
    file_ids: list[str] = Field(default_factory=list)
    """Files on screen or selected."""
    collection_ids: list[str] = Field(default_factory=list)
    """Collections on screen or selected."""
    device_ids: list[str] = Field(default_factory=list)
    """Devices on screen or selected; their ids are chosen by users and may look like anything."""
    view_ids: list[str] = Field(default_factory=list)
    """Saved searches (Views) applied to a resource table on screen."""
    table_state: dict[str, Any] | None = None
    """The resource table on screen: its target and live definition (query, columns, sort)."""
    visualizer_state: dict[str, Any] | None = None
    """Opaque visualizer state, when the message was written from the visualizer."""
    display_time_anchor_ns: int | None = None
    """Epoch nanoseconds shown as t=0 while the user reads times as offsets; else None."""
    display_time_anchor_label: str | None = None
    """How the client names that t=0 to the user; None whenever the anchor is None."""
    misc_context: dict[str, Any] | None = None
    """Client context that fits no typed field above; prefer adding a field when a shape recurs."""


class AnalysisScope(BaseModel):
    """A window over the data an agent is meant to analyse.

    Times are inclusive bounds in nanoseconds since the Unix epoch. A field left as None does
    not constrain its dimension, so a scope with every field None means "no scope". Tools
    choose to honour the scope; this model only carries it.
    """

    start_time: int | None = None
    """Inclusive lower bound, epoch nanoseconds."""
    end_time: int | None = None
    """Inclusive upper bound, epoch nanoseconds."""

    def merge(self, override: AnalysisScope) -> AnalysisScope:
        """Combine field by field: a set (non-None) value of ``override`` wins, else ours stays.

        Typical use: ``template_scope.merge(invoke_time_scope)``, where a launch overrides some
        dimensions and inherits the others from the authored template.
        """
        merged: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(override, name)
            merged[name] = value if value is not None else getattr(self, name)
        return type(self)(**merged)


_LEGACY_MARKER = re.compile(r"\A\s*<ctx>(?P<body>.*)</ctx>\s*\Z", re.DOTALL)
_MARKER_DEPTH = 64
"""Deepest nesting a marker's JSON may have; a viewing context needs a few levels. Deeper
text is not a marker: ``json.loads`` recurses once per level and would raise RecursionError
while a thread is read."""
_JSON_STRUCTURE = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
"""The characters that decide JSON nesting, and escapes (so an escaped quote is skipped)."""


def _nests_deeper_than(body: str, limit: int) -> bool:
    """Whether the arrays and objects of ``body`` (read as JSON) nest deeper than ``limit``.

    Linear, and it stops at the first level too deep. Brackets inside strings do not count.
    """
    depth = 0
    in_string = False
    for found in _JSON_STRUCTURE.finditer(body):
        token = found.group()
        if token == '"':
            in_string = not in_string
        elif in_string or token[0] == "\\":
            continue
        elif token in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def parse_legacy_context_marker(text: str) -> ClientViewingContext | None:
    """Read the old ``<ctx>{json}</ctx>`` marker text, or return None if ``text`` is not one.

    Threads written before context blocks existed stored the viewing context as a separate
    message holding only this marker. Anything that is not exactly a marker around a JSON
    object valid as :class:`ClientViewingContext` is left alone (None).
    """
    match = _LEGACY_MARKER.match(text)
    if match is None:
        return None
    body = match.group("body")
    if _nests_deeper_than(body, _MARKER_DEPTH):
        return None
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        return ClientViewingContext.model_validate(data)
    except ValidationError:
        return None
