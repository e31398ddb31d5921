"""Guarded PDF text reading (pypdf): page numbers, an output limit, clear errors."""

from roboz.shed.pdf.reader import PdfError, PdfLimits, PdfText, read_pdf

__all__ = ["PdfError", "PdfLimits", "PdfText", "read_pdf"]
