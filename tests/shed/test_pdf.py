"""process_pdf: page texts with numbers, limits, clear errors, READ guard."""

from __future__ import annotations

import io
import os

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from roboz.shed.guard import PermissionDenied
from roboz.shed.models import Operation, PermissionRule
from roboz.shed.pdf import PdfError, read_pdf

from .fileutil import make_workspace


def pdf_bytes(pages: list[str], password: str | None = None) -> bytes:
    """A small valid PDF whose pages show the given text (Helvetica, one line each)."""
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(width=300, height=200)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
    if password:
        writer.encrypt(password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture
def ws(tmp_path):
    ws = make_workspace(tmp_path)
    (ws.base / "notes/report.pdf").write_bytes(pdf_bytes([f"Page text {i}" for i in range(1, 6)]))
    return ws


def test_reads_a_page_range_with_numbers(ws):
    result = read_pdf(ws.policy, "notes/report.pdf", 2, 3)
    assert "--- page 2 of 5 ---\nPage text 2" in result.text
    assert "--- page 3 of 5 ---\nPage text 3" in result.text
    assert "Page text 1" not in result.text and "Page text 4" not in result.text
    assert not result.truncated


def test_output_limit_says_how_to_continue(ws):
    result = read_pdf(ws.policy, "notes/report.pdf", 1, 5, output_limit=70)
    assert result.truncated
    assert "output limit of 70 characters reached" in result.text
    assert "smaller range" in result.text and "start_page=" in result.text


def test_encrypted_and_non_pdf_files_are_clear_errors(ws):
    (ws.base / "notes/locked.pdf").write_bytes(pdf_bytes(["hidden"], password="pw"))
    with pytest.raises(PdfError, match="encrypted"):
        read_pdf(ws.policy, "notes/locked.pdf")
    with pytest.raises(PdfError, match="not a PDF"):
        read_pdf(ws.policy, "notes/a.txt")
    (ws.base / "notes/broken.pdf").write_bytes(b"%PDF-1.4\nnonsense")
    with pytest.raises(PdfError):
        read_pdf(ws.policy, "notes/broken.pdf")
    with pytest.raises(PdfError, match="beyond"):
        read_pdf(ws.policy, "notes/report.pdf", 9, 10)


def test_guarded_by_read(tmp_path):
    ws = make_workspace(
        tmp_path, allow=(PermissionRule(pattern="notes/**", operations={Operation.CREATE}),)
    )
    (ws.base / "notes/r.pdf").write_bytes(pdf_bytes(["x"]))
    (ws.outside / "o.pdf").write_bytes(pdf_bytes(["outside text"]))
    os.symlink(ws.outside / "o.pdf", ws.base / "notes/link.pdf")
    for path in ("notes/r.pdf", "notes/link.pdf", f"{ws.outside}/o.pdf"):
        with pytest.raises(PermissionDenied):
            read_pdf(ws.policy, path)
