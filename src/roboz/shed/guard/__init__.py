"""The path guard of the Shed's file tools: permission checks that are symlink- and race-safe.

A command is checked path by path against a PermissionPolicy, first as written, then as it
physically resolves (walking one component at a time without following symlinks); the walk
pins what it found, and the command then acts only through those pinned descriptors. The
file operations here work on pinned descriptors, and a per-command deadline bounds the work.
The modules behind this face are private; ``PermissionPolicy`` is public from
``roboz.shed.sandbox``.
"""

from roboz.shed.guard._checks import AccessError, CommandGuard, PermissionDecided, PermissionDenied
from roboz.shed.guard._deadline import CommandTimeout, check_deadline, deadline
from roboz.shed.guard._fsops import (
    DIR_FLAGS,
    DirPlan,
    atomic_write,
    check_subtree,
    default_file_mode,
    plan_directories,
    read_pinned,
    require_regular,
    require_regular_or_dir,
)
from roboz.shed.guard._resolve import Pinned, reopen, resolve

__all__ = [
    "DIR_FLAGS",
    "AccessError",
    "CommandGuard",
    "CommandTimeout",
    "DirPlan",
    "PermissionDecided",
    "PermissionDenied",
    "Pinned",
    "atomic_write",
    "check_deadline",
    "check_subtree",
    "deadline",
    "default_file_mode",
    "plan_directories",
    "read_pinned",
    "reopen",
    "require_regular",
    "require_regular_or_dir",
    "resolve",
]
