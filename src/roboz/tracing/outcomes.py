"""What a tool's output says about how the call went, read from its fields, not its class.

The tracing layer must not import the layers whose outputs it reads (the Shed, MCP), so it
recognises outcomes by shape: ``ok`` False (patch, pdf and MCP failures), a helper run's
``script`` and ``status``, a non-zero ``exit_status`` (file commands).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUCCESSFUL_RUNS = ("success", "listed")


@dataclass(frozen=True)
class _Shape:
    """Which outcome fields an output type has; found once per type, because probing a
    pydantic model for a missing attribute is slow enough to show in a 200-step chain."""

    ok: bool
    helper_run: bool
    exit_status: bool


_SHAPES: dict[type, _Shape] = {}


def shape_of(kind: type) -> _Shape:
    shape = _SHAPES.get(kind)
    if shape is None:
        names = set(getattr(kind, "model_fields", {})) | set(
            getattr(kind, "__dataclass_fields__", {})
        )
        shape = _Shape(
            ok="ok" in names,
            helper_run={"script", "status"} <= names,
            exit_status="exit_status" in names,
        )
        _SHAPES[kind] = shape
    return shape


def status_of(output: Any, shape: _Shape) -> str:
    if shape.ok and output.ok is False:
        return "error"
    if shape.helper_run:
        return "ok" if output.status in SUCCESSFUL_RUNS else "error"
    if shape.exit_status and isinstance(output.exit_status, int) and output.exit_status != 0:
        return "error"
    return "ok"
