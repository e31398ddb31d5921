#!/usr/bin/env bash
# The main job README.md gives: set up, then run the sandbox demo on embedded defaults
# (mock LLM; the helper daemon is started for you and stopped afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh 3.11 >&2
exec .venv/bin/python -m roboz.examples.sandbox_demo "$@"
