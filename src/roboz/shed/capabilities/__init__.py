"""Ready capabilities of the Shed: guarded files, PDF reading and SafeScripts.

Filesystem and Pdf read the permission policy from their owner (``set_attributes(
permissions=PermissionPolicy(...))``) and use the deployment's event pipe, so one policy
guards every file tool of an agent. SafeScripts talks to the helper daemon on a socket.
"""

from roboz.shed.capabilities.safe_scripts import SafeScripts

__all__ = ["SafeScripts"]
