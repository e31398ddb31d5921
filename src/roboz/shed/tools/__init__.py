"""Guarded Shed tools: file commands and patching (the pdf reader lives in ``.pdf``)."""

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
