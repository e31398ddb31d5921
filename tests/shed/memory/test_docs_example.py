"""The docs' orchestrator / Librarian example runs and prints what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import DOCS, block_under

PAGE = DOCS / "tutorials" / "threads-and-librarian.md"


def test_librarian_example(tmp_path: Path) -> None:
    code = block_under(PAGE, "## The orchestrator and the Librarian").code
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["tea | [Project memory, version 1]"]
