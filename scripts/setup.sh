#!/usr/bin/env bash
# Prepare a fresh clone: system packages (when root), then one virtual environment per
# supported Python with RoboZ installed editable, helper and development extras included.
# Idempotent: a second run only checks. Usage: scripts/setup.sh [3.11] [3.13]  (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.11 3.13)

# rg and gio are guarded file commands, bwrap is the sandbox benchmark's baseline, and
# python-prctl compiles against the libcap headers.
need_apt=()
command -v rg >/dev/null || need_apt+=(ripgrep)
command -v gio >/dev/null || need_apt+=(libglib2.0-bin)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
[ -f /usr/include/sys/capability.h ] || need_apt+=(libcap-dev)
command -v gcc >/dev/null || need_apt+=(gcc)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing ${need_apt[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "setup: please install: ${need_apt[*]} (sudo apt-get install ...)" >&2
    fi
fi

# The interpreter on PATH if it is the right version, else a pyenv installation of it.
find_python() {
    local v=$1 candidate
    for candidate in "$(command -v "python$v" || true)" \
        "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v"*/bin/python3; do
        if [ -x "$candidate" ] && "$candidate" -c \
            "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$v')" 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

for v in "${versions[@]}"; do
    venv=.venv; [ "$v" = 3.11 ] || venv=.venv-$v
    if [ ! -x "$venv/bin/python" ]; then
        py=$(find_python "$v") || { echo "setup: Python $v not found" >&2; exit 1; }
        echo "setup: creating $venv with $py"
        "$py" -m venv "$venv"
        "$venv/bin/pip" install -q --upgrade pip
    fi
    if ! "$venv/bin/python" -c "import roboz, roboz_helper, prctl, pyroute2, pytest, xprocess" 2>/dev/null ||
        [ pyproject.toml -nt "$venv/.roboz-installed" ]; then
        echo "setup: installing RoboZ into $venv"
        "$venv/bin/pip" install -q -e '.[helper,dev]'
        touch "$venv/.roboz-installed"
    fi
done
