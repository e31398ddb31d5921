"""The pdf skill: the guarded process_pdf reader and how to use it."""

from __future__ import annotations

from roboz.shed.tools.context import PdfContext
from roboz.shed.tools.pdf import get_pdf_tool
from roboz.tools import Skill, SkillFactory

PDF_INSTRUCTIONS = """\
## process_pdf

Read a PDF's text: {"action": "process_pdf", "rationale": "...", "path": "report.pdf",
"start_page": 1, "end_page": 3}. Pages are 1-based and inclusive; each page's text is headed
by its number. The combined output is limited: when it is cut, the notice says which pages
were shown; ask again with a smaller range. Images are ignored and there is no OCR (an
existing text layer is read). Encrypted PDFs cannot be read: ask for a decrypted copy. The
path needs read permission.
"""

pdf_skill: SkillFactory[PdfContext] = Skill.factory(
    name="pdf",
    description="Read the text of PDF files page by page (process_pdf).",
    instructions=PDF_INSTRUCTIONS,
    build_tools=get_pdf_tool,
)
