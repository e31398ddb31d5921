#!/usr/bin/env bash
# Build the documentation site (docs/ -> site/) with `mkdocs build --strict`: a broken link, a
# page missing from the navigation or a stale API reference is an error. Offline: the theme's
# web fonts and fetching plugins are off (mkdocs.yml). Extra arguments go to mkdocs build.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/mkdocs ] || scripts/setup.sh 3.11
# Material prints a banner about MkDocs 2 on every build; it is not a warning about the site.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict "$@"
