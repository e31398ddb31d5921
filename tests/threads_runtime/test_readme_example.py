"""The README's "Client tools, goals and tasks" example runs and prints what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_client_tools_example(tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("## Client tools, goals and tasks") :]
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```\n", start)]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "pick_files {'pattern': '*.csv'} client_tool_turn",
        "3 CSV files user_turn achieved completed",
    ]
    for line in done.stdout.splitlines():  # the comments in the example say the same
        assert f"\n# {line}\n" in code
