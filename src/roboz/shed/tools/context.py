"""What the guarded file tools need: the policy, the event pipe, limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from roboz.runtime.events import EventPipe
from roboz.shed.files.base import Limits
from roboz.shed.files.engine import CheckedHook
from roboz.shed.pdf.reader import DEFAULT_OUTPUT_LIMIT
from roboz.shed.sandbox import PermissionPolicy


@dataclass(frozen=True, kw_only=True)
class FilesystemContext:
    """Context of the filesystem skill: ``permissions`` guard every command and patch;
    permission decisions are emitted on ``pipe``."""

    permissions: PermissionPolicy
    pipe: EventPipe | None = None
    limits: Limits = field(default_factory=Limits)
    on_checked: CheckedHook | None = field(default=None, repr=False)
    """Test hook: called after a command's checks passed, before it runs."""


@dataclass(frozen=True, kw_only=True)
class PdfContext:
    """Context of the pdf skill: ``permissions`` guard every read (READ)."""

    permissions: PermissionPolicy
    pipe: EventPipe | None = None
    output_limit: int = DEFAULT_OUTPUT_LIMIT
