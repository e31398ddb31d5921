"""The recovery benchmark keeps working (figures printed, never asserted as timings)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.durable.workers_support import ROOT
from tests.postgres import Cluster

pytest.importorskip("dbos")


def test_recovery_benchmark_prints_its_figures(postgres_cluster: Cluster) -> None:
    # Requesting the cluster makes a missing PostgreSQL a failure in CI rather than a skip
    # hidden inside the benchmark, which starts a cluster of its own.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "bench_recovery", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for figure in (
        "heartbeat every 0.25 s, a worker counts as dead after 2 s of silence",
        "death to resumption by another worker: median",
        "death to resumption by a restart under the same executor id: median",
    ):
        assert figure in done.stdout
