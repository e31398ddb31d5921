"""The "Client tools, goals and tasks" example of the docs runs and prints what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import DOCS, block_under

PAGE = DOCS / "how-to" / "client-tools.md"


def test_client_tools_example(tmp_path: Path) -> None:
    code = block_under(PAGE, "# Client tools, goals and tasks").code
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "pick_files {'pattern': '*.csv'} client_tool_turn",
        "3 CSV files user_turn achieved completed",
    ]
    for line in done.stdout.splitlines():  # the comments in the example say the same
        assert f"\n# prints: {line}\n" in code
