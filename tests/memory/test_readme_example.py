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


def test_readme_scale_out_example(postgres_url: str, tmp_path: Path) -> None:
    """The "Scale out" commands and example, on the test cluster instead of db.internal."""
    from tests.cli.helpers import run_cli

    text = README.read_text()
    section = text[text.index("## Scale out") :]
    shell = section[section.index("```sh") + len("```sh") : section.index("```\n", 10)]
    url = "postgresql://roboz@db.internal/roboz"
    assert f"roboz threads migrate --url {url}" in shell
    migrated = run_cli("threads", "migrate", "--url", postgres_url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    again = run_cli("threads", "migrate", "--url", postgres_url, cwd=tmp_path)
    assert "already at" in again.stdout
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```\n", start)]
    assert url in code
    done = subprocess.run(
        [sys.executable, "-c", code.replace(url, postgres_url)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["shared 3"]
