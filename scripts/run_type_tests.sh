#!/usr/bin/env bash
# Type tests (tests/typing): both checkers must agree with every assert_type and must still
# report every expected error (an ignore comment that suppresses nothing fails the run).
# Uses the environment setup.sh synced from uv.lock; VENV picks another one (e.g. .venv-3.13).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
[ -x "$venv/bin/python" ] || scripts/setup.sh 3.11 >&2
version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

"$venv/bin/pyright" --pythonpath "$venv/bin/python" --pythonversion "$version" tests/typing
"$venv/bin/mypy" --strict --warn-unused-ignores --python-version "$version" \
    --python-executable "$venv/bin/python" tests/typing
