"""Ready capabilities of the Shed: guarded files, PDF reading and SafeScripts.

Filesystem and Pdf derive the permission policy from their owner's sandbox
(``DeployableAgent(sandbox=Sandbox(...) or PermissionPolicy(...))``) and use the deployment's
event pipe. SafeScripts talks
to the helper daemon on a socket. ConversationSnapshots, MemoryConsolidation,
ArtifactRetention and MaintenanceCadence are the Librarian's steps; ProjectMemory gives a
watched agent its memory.
"""

from roboz.shed.capabilities.files import Filesystem, Pdf
from roboz.shed.capabilities.memory import (
    ArtifactRetention,
    ConversationSnapshots,
    MaintenanceCadence,
    MemoryConsolidation,
    ProjectMemory,
)
from roboz.shed.capabilities.safe_scripts import SafeScripts

__all__ = [
    "ArtifactRetention",
    "ConversationSnapshots",
    "Filesystem",
    "MaintenanceCadence",
    "MemoryConsolidation",
    "Pdf",
    "ProjectMemory",
    "SafeScripts",
]
