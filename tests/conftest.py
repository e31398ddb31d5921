"""Shared test configuration.

Tests that need root or kernel namespaces use the ``needs_root`` fixture.  On a developer's
machine without them they skip; under CI (``CI`` set) a skip would hide an untested security
claim, so there it fails instead.

Thread-store tests take the ``backend`` fixture (through ``store``) and run once on SQLite and
once on a throwaway PostgreSQL cluster; a test marked ``sqlite_only`` is about SQLite itself.

The batteries in ``SLOW`` are marked ``slow``: ``scripts/test.sh --quick`` leaves them out, the
full run (and CI) runs them. Those in ``ONCE`` are marked ``once``: the full run runs them on
its first Python only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.postgres import Cluster, find_bindir, start_cluster


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def skip_or_fail(reason: str) -> None:
    """Skip locally; fail under CI, where every privileged test must run."""
    if running_in_ci():
        pytest.fail(f"required capability missing in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def needs_root() -> None:
    if os.geteuid() != 0:
        skip_or_fail("needs root")


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster for the whole session (skips locally without
    PostgreSQL, fails in CI)."""
    if find_bindir() is None:
        skip_or_fail("PostgreSQL is not installed (apt-get install postgresql)")
    yield from start_cluster()


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    return postgres_cluster.url


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# Batteries that start many processes (DBOS workers, benchmark runs, type checkers) and take
# most of the suite's time; each prefix is a file or folder below the repository's root.
SLOW = (
    "tests/durable/",
    "tests/server/test_durable_serve.py",
    "tests/server/test_serve_cli.py",
    "tests/server/ui/",
    "tests/benchmarks/",
    "tests/mcp/test_benchmark_runs.py",
    "tests/memory/test_readme_example.py::test_readme_scale_out_example",
    "tests/cli/test_cli_scaffold.py",
    "tests/cli/test_cli_inventory.py",
    "tests/cli/test_cli_threads_store.py",
    "tests/threads/test_postgres.py",
    "tests/sandbox/test_view_walk.py",
)

# Batteries whose subject does not change with the Python that runs the suite: a browser
# driving the web UI's JavaScript, the benchmark scripts, a type checker on generated code.
# They are marked ``once``: scripts/test.sh runs them on the first Python only (the server,
# the library and the CLI they drive are tested on every Python by the rest of the suite).
ONCE = (
    "tests/server/ui/",
    "tests/benchmarks/",
    "tests/mcp/test_benchmark_runs.py",
    "tests/durable/test_worker_bench.py",
    "tests/cli/test_cli_scaffold.py::test_generated_code_passes_mypy_strict",
)


# Batteries whose processes (several DBOS workers, killed and restarted against deadlines) must
# not share the cores with another test: scripts/test.sh runs them in a second pass, alone.
SERIAL = (
    "tests/durable/test_proof.py",
    "tests/durable/test_worker.py",
)


def _in_this_pass(item: pytest.Item) -> bool:
    """ROBOZ_TEST_PASS=parallel leaves the SERIAL tests out, =serial keeps only them; unset,
    everything runs (plain pytest)."""
    chosen = os.environ.get("ROBOZ_TEST_PASS", "")
    if chosen not in ("parallel", "serial"):
        return True
    return (chosen == "serial") == item.nodeid.startswith(SERIAL)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(ONCE):
            item.add_marker(pytest.mark.once)
    other_pass = [item for item in items if not _in_this_pass(item)]
    if other_pass:
        config.hook.pytest_deselected(items=other_pass)
        items[:] = [item for item in items if _in_this_pass(item)]
    # A test about SQLite's file or its SQL runs on the SQLite store only; every other test of
    # the `store` fixture runs on both backends.
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec else None
        if backend == "postgres" and item.get_closest_marker("sqlite_only"):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
