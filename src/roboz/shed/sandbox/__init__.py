"""Filesystem scopes and permission policies for the guarded Shed tools.

``PermissionPolicy`` says which operations on which paths are allowed, denied or asked; the
checks that enforce it live in ``roboz.shed.guard``.
"""

from roboz.shed.guard._policy import PermissionPolicy

__all__ = ["PermissionPolicy"]
