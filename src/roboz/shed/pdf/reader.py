"""Reading the text of a PDF's pages with pypdf, through a READ-checked pinned descriptor."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

from pypdf import PdfReader
from pypdf.errors import PdfReadError, PyPdfError

from roboz.runtime.events import EventPipe
from roboz.shed.guard import CommandGuard, read_pinned, require_regular
from roboz.shed.models import Operation
from roboz.shed.sandbox import PermissionPolicy

DEFAULT_OUTPUT_LIMIT = 40_000
MAX_PDF_BYTES = 200 * 1024 * 1024


class PdfError(Exception):
    """The file cannot be read as a PDF (not a PDF, encrypted, damaged, bad page range)."""


@dataclass(frozen=True)
class PdfText:
    text: str
    pages: int
    first: int
    last: int
    """The last page actually included (may be before the requested end when truncated)."""
    truncated: bool


def read_pdf(
    policy: PermissionPolicy,
    path: str | os.PathLike[str],
    start_page: int = 1,
    end_page: int | None = None,
    *,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    pipe: EventPipe | None = None,
    tool: str = "process_pdf",
) -> PdfText:
    """The text of pages ``start_page``..``end_page`` (1-based, inclusive), each headed by its
    page number, within ``output_limit`` characters."""
    path = os.fspath(path)
    guard = CommandGuard(policy, tool=tool, pipe=pipe)
    with guard.pin(Operation.READ, path) as pinned:
        require_regular(pinned, path)
        guard.confirm()
        assert pinned.st is not None
        if pinned.st.st_size > MAX_PDF_BYTES:
            raise PdfError(f"{path}: larger than {MAX_PDF_BYTES} bytes; refused")
        data = read_pinned(pinned, MAX_PDF_BYTES)
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise PdfError(f"{path}: not a PDF file")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise PdfError(f"{path}: the PDF is encrypted; ask the user for a decrypted copy")
        pages = len(reader.pages)
    except PdfError:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError) as error:
        raise PdfError(f"{path}: not a readable PDF ({error})") from None
    last = pages if end_page is None else end_page
    if start_page < 1 or last < start_page:
        raise PdfError(f"{path}: invalid page range {start_page}-{last}")
    if start_page > pages:
        raise PdfError(f"{path}: has {pages} page(s); start_page {start_page} is beyond it")
    last = min(last, pages)
    parts: list[str] = []
    size = 0
    included = start_page - 1
    truncated = False
    for number in range(start_page, last + 1):
        try:
            text = reader.pages[number - 1].extract_text() or ""
        except Exception as error:
            text = f"[text of this page could not be extracted: {error}]"
        block = f"--- page {number} of {pages} ---\n{text.strip()}\n"
        if size + len(block) > output_limit:
            room = output_limit - size
            if room > 200:
                parts.append(block[:room])
            truncated = True
            break
        parts.append(block)
        size += len(block)
        included = number
    if truncated:
        shown = f"pages {start_page}-{included}" if included >= start_page else "no full page"
        parts.append(
            f"[output limit of {output_limit} characters reached: {shown} shown in full. "
            f"Ask for a smaller range, e.g. start_page={max(included + 1, start_page)} "
            f"end_page={max(included + 1, start_page) + max((included - start_page) // 2, 0)}]"
        )
    return PdfText("".join(parts), pages, start_page, included, truncated)
