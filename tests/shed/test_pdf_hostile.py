"""Hostile PDFs: whatever the bytes, read_pdf returns page texts or raises PdfError naming the
file, within its time and memory bounds. The files are built here, byte by byte."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roboz.shed.pdf import PdfError, PdfLimits, read_pdf

from .fileutil import make_workspace

HELLO = b"BT /F1 12 Tf 20 100 Td (Hello) Tj ET"
FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def build(
    objects: list[bytes], trailer: bytes = b"", startxref: bytes | None = None, root: int = 1
) -> bytes:
    """A PDF of these objects (numbered from 1) with a correct xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root %d 0 R %s>>\nstartxref\n%s\n%%%%EOF\n" % (
        len(objects) + 1,
        root,
        trailer,
        str(xref).encode() if startxref is None else startxref,
    )
    return bytes(out)


def one_page(content: bytes = HELLO, stream_keys: bytes = b"", **kwargs: object) -> bytes:
    """One page showing ``content``; objects 1-5, so a test may add a 6th."""
    extra = kwargs.pop("extra", [])
    assert isinstance(extra, list)
    return build(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] "
            b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
            b"<< /Length %d %s>>\nstream\n%s\nendstream" % (len(content), stream_keys, content),
            FONT,
            *extra,
        ],
        **kwargs,  # type: ignore[arg-type]
    )


VALID = one_page()


def _edit(old: bytes, new: bytes) -> bytes:
    assert VALID.count(old) == 1, old
    return VALID.replace(old, new)


# Each of these escaped read_pdf as something other than PdfError (the exception pypdf raised).
HOSTILE = {
    # NotImplementedError: /Encrypt names an empty dictionary (no /Filter: "not Standard").
    "encrypt-empty-object": one_page(trailer=b"/Encrypt 6 0 R ", extra=[b"<< >>"]),
    # OverflowError: startxref followed by 400 digits (a seek beyond ssize_t).
    "startxref-400-digits": one_page(startxref=b"9" * 400),
    # OverflowError: the same through the trailer's /Prev.
    "prev-beyond-ssize_t": one_page(trailer=b"/Prev " + b"9" * 30 + b" "),
    # AttributeError: the trailer is a string, not a dictionary.
    "trailer-a-string": _edit(b"trailer\n<< /Size 6 /Root 1 ", b"trailer()Size 6 /Root 1 "),
    # AttributeError: the trailer is a reference to object 0.
    "trailer-a-reference": _edit(b"trailer\n<<", b"trailer0 0 R<"),
    # AttributeError: a page object that is a reference to object 0.
    "page-a-reference": _edit(b"3 0 obj\n<<", b"3 0 obj\n0 0 R<"),
    # TypeError: an xref subsection whose first number is a keyword (NullObject += int).
    "xref-start-not-a-number": _edit(b"xref\n0 6\n", b"xref\nendobj 6\n"),
    # TypeError: an xref subsection that starts with a dictionary (pypdf uses it as a key).
    "xref-start-a-dictionary": _edit(b"xref\n0 6\n", b"xref<< >>6\n"),
}


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)


def _read(ws, data: bytes, name: str = "notes/x.pdf", **kwargs: object):
    (ws.base / name).write_bytes(data)
    return read_pdf(ws.policy, name, **kwargs)  # type: ignore[arg-type]


def test_the_builder_makes_a_readable_pdf(ws) -> None:
    result = _read(ws, VALID)
    assert result.text == "--- page 1 of 1 ---\nHello\n" and result.pages == 1


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_structure_is_a_pdf_error_naming_the_file(ws, name: str) -> None:
    with pytest.raises(PdfError) as info:
        _read(ws, HOSTILE[name], f"notes/{name}.pdf")
    message = str(info.value)
    assert message.startswith(f"notes/{name}.pdf: not a readable PDF ("), message
    assert "\n" not in message


def test_a_decompression_bomb_hits_the_memory_bound(ws) -> None:
    # 200 MB of spaces in a 200 kB stream; the parse may use 150 MB beyond the file.
    bomb = zlib.compress(b" " * 200_000_000, 9)
    data = one_page(content=bomb, stream_keys=b"/Filter /FlateDecode ")
    with pytest.raises(PdfError) as info:
        _read(ws, data, "notes/bomb.pdf", limits=PdfLimits(memory_bytes=150 << 20))
    assert str(info.value).startswith("notes/bomb.pdf: ")
    assert "more memory than the bound allows" in str(info.value)


def test_a_parse_that_runs_too_long_is_stopped_at_the_deadline(ws) -> None:
    # A million text operations in a 50 kB stream: pypdf takes tens of seconds on them.
    ops = zlib.compress(b"BT " + b"1 0 0 1 0 0 Tm (x) Tj " * 1_000_000 + b"ET", 9)
    data = one_page(content=ops, stream_keys=b"/Filter /FlateDecode ")
    with pytest.raises(PdfError) as info:
        _read(ws, data, "notes/slow.pdf", limits=PdfLimits(seconds=2))
    assert str(info.value).startswith("notes/slow.pdf: parsing took longer than 2s")


def test_limits_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="PdfLimits.seconds"):
        PdfLimits(seconds=0)
    with pytest.raises(ValueError, match="PdfLimits.memory_bytes"):
        PdfLimits(memory_bytes=-1)


_TOKENS = [
    b"null", b"0", b"-1", b"1e400", b"9" * 40, b"[]", b"<< >>", b"()", b"/X", b"0 0 R",
    b"1 0 R", b"3 0 R", b"9 0 R", b"obj", b"endobj", b"stream", b"endstream", b"xref",
    b"trailer", b"startxref", b"<<", b">>", b"[", b"]", b"%", b"\n", b"/Encrypt 5 0 R",
]  # fmt: skip


# Each example starts the parser's child process; 30 a run keep the property honest (a new
# draw each run) without a minute of start-ups; the fuzz campaign behind issue 24 ran ~1.7M.
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.data())
def test_any_mutation_of_a_valid_pdf_reads_or_is_a_pdf_error(ws, data: st.DataObject) -> None:
    mutated = bytearray(VALID)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4), label="edits")):
        at = data.draw(st.integers(min_value=0, max_value=len(mutated)), label="at")
        cut = data.draw(st.integers(min_value=0, max_value=6), label="cut")
        junk = data.draw(st.one_of(st.sampled_from(_TOKENS), st.binary(max_size=4)), label="junk")
        mutated[at : at + cut] = junk
    try:
        result = _read(ws, bytes(mutated))
    except PdfError as error:
        assert str(error).startswith("notes/x.pdf: "), error
    else:
        assert result.pages >= 1 and result.text.startswith("--- page ")
