"""bench_mcp keeps working (its figures are printed, never asserted as timings)."""

import subprocess
import sys


def test_mcp_benchmark_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "bench_mcp", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "MCP tool call:" in done.stdout and "with the SDK directly" in done.stdout
    assert "chained calls summarised" in done.stdout and "API without SDK" in done.stdout
