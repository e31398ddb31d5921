"""Run the roboz CLI as a real subprocess in a chosen directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ROBOZ_ENV_PASSWORD", "ROBOZ_DEBUG")
    }
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "roboz.cli", *args],
        cwd=cwd,
        env=environment,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
        # No controlling terminal: password prompts read the piped stdin.
        start_new_session=True,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert result.returncode == code, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("roboz: error: ")]
    assert len(errors) == 1, result.stderr
    assert text in errors[0], result.stderr
    assert "Traceback" not in result.stderr
