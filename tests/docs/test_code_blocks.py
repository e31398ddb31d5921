"""Every code block of the documentation is run, parsed, or marked as not runnable.

The conventions are in ``tests/docs/blocks.py`` and on the site's contributing page
(docs/contributing.md). Each Python block runs in a fresh temporary directory in its own
interpreter; a ``postgres`` block gets a new database in the suite's throwaway cluster, which
replaces the placeholder URL in its text and is also in ``ROBOZ_DURABLE_URL``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests import forked
from tests.docs.blocks import KINDS, Block, all_blocks, matches

PLACEHOLDER_URL = "postgresql://roboz@db.internal/roboz"
BLOCKS = all_blocks()
CHECKED = [block for block in BLOCKS if block.kind != "shown"]
_databases = itertools.count()


def run_python(block: Block, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    script = tmp_path / "docs_example.py"  # a name no module of the example shadows
    script.write_text(block.code)
    done = forked.run([str(script)], cwd=tmp_path, env={**os.environ, **(env or {})}, timeout=180)
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr[-4000:]}"
    return done.stdout


def check_output(block: Block, stdout: str) -> None:
    expected = block.expected_output()
    if expected is None:
        return
    printed = stdout.splitlines()
    assert len(printed) == len(expected) and all(map(matches, expected, printed)), (
        f"{block.id} printed:\n{stdout}\nbut its '# prints:' comments say:\n" + "\n".join(expected)
    )


@pytest.mark.parametrize("block", CHECKED, ids=[block.id for block in CHECKED])
def test_code_block(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    assert block.kind != "unmarked", (
        f"{block.id}: mark this {block.lang} block <!-- docs-test: run --> (it is executed) "
        "or <!-- docs-test: illustrative --> (it is only shown) on the line before it"
    )
    assert block.kind in KINDS[block.family], (
        f"{block.id}: '{block.kind}' is not a kind for a {block.lang} block; "
        f"use one of {sorted(KINDS[block.family])}"
    )
    if block.kind in {"fragment", "illustrative"}:
        pytest.skip(f"{block.kind}: shown, not run")
    if block.family == "data":
        if block.lang == "toml":
            tomllib.loads(block.code)
        else:
            json.loads(block.code)
    elif block.family == "shell":
        bin_dir = str(Path(sys.executable).parent)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=tmp_path,
            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{block.id} failed:\n{done.stdout}{done.stderr}"
    elif block.kind == "postgres":
        url = fresh_database(request)
        code = block.code.replace(PLACEHOLDER_URL, url)
        runnable = Block(block.path, block.line, block.lang, block.marker, code)
        check_output(block, run_python(runnable, tmp_path, {"ROBOZ_DURABLE_URL": url}))
    else:
        check_output(block, run_python(block, tmp_path))


def fresh_database(request: pytest.FixtureRequest) -> str:
    """A new database in the session's cluster with the thread and durable schemas."""
    import psycopg

    from roboz.durable import migrate
    from tests.postgres import Cluster

    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    name = f"docs_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    url = cluster.url.replace("dbname=postgres", f"dbname={name}")
    migrate(url)
    return url
