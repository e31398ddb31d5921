"""The PDF parse itself, run as a script in a child process (see reader.py for why).

It imports pypdf and the standard library only, so the child starts without any of roboz
(run as a script, `python -P`): the PDF bytes come on stdin, the page range and bounds in
argv, and one JSON object goes to stdout: the page texts, or ``{"error": ...}`` with the
reason. Any exception pypdf raises on a hostile file becomes that error; only a death (the
parent's deadline, a crash) leaves stdout empty.
"""

from __future__ import annotations

import io
import json
import logging
import resource
import sys
import warnings
from typing import Any


class _Unreadable(Exception):
    """The reason, as the user reads it after the file's name."""


def _page_texts(data: bytes, start_page: int, end_page: int | None, output_limit: int) -> Any:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise _Unreadable("the PDF is encrypted; ask the user for a decrypted copy")
        pages = len(reader.pages)
    except _Unreadable:
        raise
    except MemoryError:
        raise
    except Exception as error:
        # Every kind: on hostile input pypdf raises AttributeError, TypeError, OverflowError,
        # NotImplementedError, RecursionError... besides its own PdfReadError.
        raise _Unreadable(f"not a readable PDF ({type(error).__name__}: {error})") from None
    last = pages if end_page is None else end_page
    if start_page < 1 or last < start_page:
        raise _Unreadable(f"invalid page range {start_page}-{last}")
    if start_page > pages:
        raise _Unreadable(f"has {pages} page(s); start_page {start_page} is beyond it")
    last = min(last, pages)
    parts: list[str] = []
    size = 0
    included = start_page - 1
    truncated = False
    for number in range(start_page, last + 1):
        try:
            text = reader.pages[number - 1].extract_text() or ""
        except MemoryError:
            raise
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
    return {
        "text": "".join(parts),
        "pages": pages,
        "first": start_page,
        "last": included,
        "truncated": truncated,
    }


def main(argv: list[str]) -> int:
    start_page, end_page, output_limit, memory_bytes = argv
    data = sys.stdin.buffer.read()
    # The bound on address space, set before anything of the file is parsed; the input is
    # already in memory and counted in it.
    resource.setrlimit(resource.RLIMIT_AS, (int(memory_bytes), int(memory_bytes)))
    # pypdf reports what it repairs through logging and warnings; on hostile input that is
    # thousands of lines nobody reads. The outcome is the JSON below.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    try:
        result = _page_texts(
            data, int(start_page), None if end_page == "-" else int(end_page), int(output_limit)
        )
    except _Unreadable as reason:
        result = {"error": str(reason)}
    except MemoryError:
        result = {"error": "parsing it needs more memory than the bound allows"}
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
