"""Filesystem scopes and permission policies for the guarded Shed tools.

``PermissionPolicy`` says which operations on which paths are allowed, denied or asked; the
checks that enforce it live in ``roboz.shed.guard``. ``Sandbox`` is the layout an
orchestrator and its Librarian work in, and derives their policy.
"""

from roboz.shed.guard._policy import PermissionPolicy
from roboz.shed.sandbox.layout import Sandbox, SandboxError

__all__ = ["PermissionPolicy", "Sandbox", "SandboxError"]
