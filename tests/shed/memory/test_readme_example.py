"""The README's Sandbox / Librarian example runs and prints what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_librarian_example(tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("**Sandbox, the orchestrator and the Librarian**") :]
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```\n", start)]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["tea | [Project memory, version 1]"]
