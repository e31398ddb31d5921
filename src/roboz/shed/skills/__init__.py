"""Reusable Shed skills: instructions together with their complete tool chains."""

from roboz.shed.skills.filesystem import filesystem_instructions, filesystem_skill
from roboz.shed.skills.pdf import pdf_skill
from roboz.shed.tools.context import FilesystemContext, PdfContext

__all__ = [
    "FilesystemContext",
    "PdfContext",
    "filesystem_instructions",
    "filesystem_skill",
    "pdf_skill",
]
