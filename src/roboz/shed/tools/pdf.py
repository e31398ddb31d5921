"""The process_pdf chain: validate the page range, then read the PDF under READ permission."""

from __future__ import annotations

from pydantic import Field

from roboz.models import Empty, Message, Str
from roboz.shed.pdf.reader import PdfError, read_pdf
from roboz.shed.tools._checked import Accepted, Refused, executor, run_guarded
from roboz.shed.tools.context import PdfContext
from roboz.tools import Tool, factory


class PdfInput(Empty):
    path: str = Field(..., description="The PDF file (relative to the base).")
    start_page: int = Field(1, ge=1, description="First page, 1-based.")
    end_page: int | None = Field(None, ge=1, description="Last page (inclusive); default last.")


class PdfRequest(Accepted):
    request: PdfInput | None = Field(default=None, exclude=True)


class PdfResult(Str):
    """Page texts headed by their page numbers, or why the PDF could not be read."""

    ok: bool = Field(default=True, exclude=True)
    truncated: bool = Field(default=False, exclude=True)


@factory
def process_pdf(
    input: PdfInput, messages: list[Message], ctx: PdfContext
) -> PdfRequest | PdfResult:
    """Read the text of a PDF's pages (pypdf), with page numbers.

    Give path, start_page and end_page (inclusive). The combined output is limited; when it
    is cut, ask again for a smaller page range. Images are ignored and there is no OCR (an
    existing text layer is read). Encrypted PDFs need a decrypted copy.
    """
    if input.end_page is not None and input.end_page < input.start_page:
        return PdfResult(
            value=f"process_pdf: end_page {input.end_page} is before start_page {input.start_page}",
            ok=False,
        )
    return PdfRequest(value=f"reading {input.path}", request=input)


@executor(process_pdf, PdfRequest)
def read_pdf_pages(input: Str, messages: list[Message], ctx: PdfContext) -> PdfResult:
    """Check READ permission and extract the requested pages (passive)."""
    assert isinstance(input, PdfRequest) and input.request is not None
    request = input.request
    text = run_guarded(
        "process_pdf",
        request.path,
        lambda: read_pdf(
            ctx.permissions,
            request.path,
            request.start_page,
            request.end_page,
            output_limit=ctx.output_limit,
            pipe=ctx.pipe,
        ),
        expected=(PdfError,),
    )
    if isinstance(text, Refused):
        return PdfResult(value=text.text, ok=False)
    return PdfResult(value=text.text, truncated=text.truncated)


def get_pdf_tool(ctx: PdfContext) -> list[Tool]:
    """The guarded process_pdf chain for ``ctx``: [process_pdf, its reader]."""
    return [process_pdf(ctx), read_pdf_pages(ctx)]
