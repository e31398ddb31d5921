"""Filesystem scopes and permission policies for the guarded Shed tools."""

from roboz.shed.sandbox.guard import AccessError, CommandGuard, PermissionDecided, PermissionDenied
from roboz.shed.sandbox.policy import PermissionPolicy
from roboz.shed.sandbox.resolve import Pinned, resolve

__all__ = [
    "AccessError",
    "CommandGuard",
    "PermissionDecided",
    "PermissionDenied",
    "PermissionPolicy",
    "Pinned",
    "resolve",
]
