"""The README's "Persisted and resumable runs" example runs and prints what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_persisted_run_example(tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("## Persisted and resumable runs") :]
    code = section[section.index("```python") + len("```python") : section.index("```\n", 10)]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["second 6 notes-1", "6"]
    assert (tmp_path / "runs.db").exists()
