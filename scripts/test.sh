#!/usr/bin/env bash
# The test command README.md gives and CI runs: lint, type-check, then the whole suite on
# every supported Python. Extra arguments go to pytest (e.g. scripts/test.sh -k chain).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh 3.11 3.13

.venv/bin/ruff check .
.venv/bin/ruff format --check src helper tests benchmarks
.venv/bin/mypy

status=0
for venv in .venv .venv-3.13; do
    echo "== pytest on $("$venv/bin/python" --version)"
    "$venv/bin/python" -m pytest -q "$@" || status=$?
done
exit $status
