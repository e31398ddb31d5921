"""Guarded PDF text reading (pypdf): page numbers, an output limit, clear errors."""

from roboz.shed.pdf.reader import PdfError, PdfText, read_pdf

__all__ = ["PdfError", "PdfText", "read_pdf"]
