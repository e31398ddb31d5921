#!/usr/bin/env bash
# The test command README.md gives and CI runs: lint, then on every supported Python the type
# checks (mypy, pyright, the type tests) and the whole suite, all in environments synced from
# uv.lock. Extra arguments go to pytest (e.g. scripts/test.sh -k chain).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh 3.11 3.13

.venv/bin/ruff check .
.venv/bin/ruff format --check src helper tests benchmarks

# == docs: the site builds with warnings as errors (its code blocks run in pytest, tests/docs)
echo "== docs site (mkdocs build --strict)"
scripts/docs.sh --quiet

status=0
for venv in .venv .venv-3.13; do
    version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    echo "== type checks on Python $version"
    "$venv/bin/mypy" --python-version "$version"
    "$venv/bin/pyright" --pythonpath "$venv/bin/python" --pythonversion "$version"
    VENV=$venv scripts/run_type_tests.sh
    echo "== pytest on Python $version"
    "$venv/bin/python" -m pytest -q "$@" || status=$?
done
exit $status
