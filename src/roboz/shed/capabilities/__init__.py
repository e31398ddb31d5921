"""Ready capabilities of the Shed: guarded files, PDF reading and SafeScripts.

Filesystem and Pdf read the permission policy from their owner (``set_attributes(
permissions=PermissionPolicy(...))``) and use the deployment's event pipe. SafeScripts talks
to the helper daemon on a socket.
"""

from roboz.shed.capabilities.files import Filesystem, Pdf
from roboz.shed.capabilities.safe_scripts import SafeScripts

__all__ = ["Filesystem", "Pdf", "SafeScripts"]
