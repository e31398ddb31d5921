"""The filesystem skill's instructions stay compact, and the prompt benchmark reports them."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.bench_prompts import BEFORE_FILESYSTEM_TOKENS, estimate_tokens
from roboz.shed.skills import filesystem_instructions


def test_the_filesystem_instructions_cost_at_most_half_of_before() -> None:
    assert estimate_tokens(filesystem_instructions()) <= BEFORE_FILESYSTEM_TOKENS // 2


def test_the_benchmark_prints_every_bundled_skill() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "bench_prompts"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for name in ("filesystem", "pdf"):
        assert f"skill {name}" in done.stdout
    assert "target <= 0.50x" in done.stdout
