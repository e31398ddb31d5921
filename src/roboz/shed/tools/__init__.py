"""Guarded Shed tools: file commands and patching (the pdf reader lives in ``.pdf``).

The memory tools live in their own modules: ``.compaction`` (a run's context), and the
Librarian's ``.snapshots``, ``.consolidation``, ``.retention`` and ``.cadence``, which share
``.maintenance``.
"""

from roboz.shed.tools.context import FilesystemContext, PdfContext
from roboz.shed.tools.files import FileCommandPlan, get_run_file_command
from roboz.shed.tools.patch import PatchInput, PatchResult, get_apply_patch

__all__ = [
    "FileCommandPlan",
    "FilesystemContext",
    "PatchInput",
    "PatchResult",
    "PdfContext",
    "get_apply_patch",
    "get_run_file_command",
]
