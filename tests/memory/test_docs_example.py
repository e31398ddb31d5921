"""The docs' persisted-run and scale-out examples run and print what they say (more closely
than tests/docs does: the files they leave and the commands beside them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import DOCS, block_under

THREADS = DOCS / "tutorials" / "threads-and-librarian.md"
SCALE_OUT = DOCS / "tutorials" / "scale-out.md"


def test_persisted_run_example(tmp_path: Path) -> None:
    code = block_under(THREADS, "## Persisted and resumable runs").code
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["second 6 notes-1", "6"]
    assert (tmp_path / "runs.db").exists()


def test_scale_out_example(postgres_url: str, tmp_path: Path) -> None:
    """The "Threads in PostgreSQL" commands and example, on the test cluster instead of
    db.internal."""
    from tests.cli.helpers import run_cli

    shell = block_under(SCALE_OUT, "## Threads in PostgreSQL", lang="sh").code
    url = "postgresql://roboz@db.internal/roboz"
    assert f"roboz threads migrate --url {url}" in shell
    migrated = run_cli("threads", "migrate", "--url", postgres_url, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    again = run_cli("threads", "migrate", "--url", postgres_url, cwd=tmp_path)
    assert "already at" in again.stdout
    code = block_under(SCALE_OUT, "## Threads in PostgreSQL").code
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
