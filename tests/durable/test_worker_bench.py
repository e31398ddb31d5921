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
        "process death to its run resuming on another worker: median",
        "floor, the dead process's session ending (its lock free in pg_locks): median",
        "goal: median <= 3 s after a process death: ",
        "peer, DBOS's own recovery (a restart under the same executor id): median",
    ):
        assert figure in done.stdout
