#!/usr/bin/env bash
# Prepare a fresh clone: system packages (when root), then one virtual environment per
# supported Python, synced from uv.lock (`uv sync --locked --dev`: RoboZ and roboz-helper
# editable, the helper daemon's extra and the dev tools), so what is tested is what the lock
# pins. Idempotent: a second run only checks.
# Usage: scripts/setup.sh [3.11] [3.13]  (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.11 3.13)

# rg and gio are guarded file commands, bwrap is the sandbox benchmark's baseline, and
# python-prctl compiles against the libcap headers and roboz-helper's build compiles sandbox-init
# (static: gcc and libc6-dev); the store suite starts throwaway PostgreSQL
# clusters (initdb, pg_ctl) to run against the PostgreSQL store as well as SQLite.
need_apt=()
command -v rg >/dev/null || need_apt+=(ripgrep)
command -v gio >/dev/null || need_apt+=(libglib2.0-bin)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
[ -f /usr/include/sys/capability.h ] || need_apt+=(libcap-dev)
command -v gcc >/dev/null || need_apt+=(gcc)
compgen -G "/usr/lib/*/libc.a" >/dev/null || need_apt+=(libc6-dev)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_apt+=(postgresql)
# The egress proxy's suite builds network namespaces (ip) and runs real clients in them.
command -v ip >/dev/null || need_apt+=(iproute2)
command -v curl >/dev/null || need_apt+=(curl)
command -v git >/dev/null || need_apt+=(git)
# The web UI's browser tests drive Debian's Chromium (Playwright with executable_path; the
# suite never downloads a browser of its own).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
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
            # The interpreter itself, not a pyenv shim: given the shim, uv sees another
            # interpreter than the environment's and makes the environment again on every run
            # (dropping its compiled bytecode, and under any test run using it).
            "$candidate" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

# uv from PyPI when it is not installed; never let it download an interpreter of its own.
export UV_PYTHON_DOWNLOADS=never
uv_cmd=()
if command -v uv >/dev/null; then
    uv_cmd=(uv)
else
    py=$(find_python "${versions[0]}") || { echo "setup: Python ${versions[0]} not found" >&2; exit 1; }
    if ! "$py" -m uv --version >/dev/null 2>&1; then
        echo "setup: installing uv with $py"
        "$py" -m pip install -q uv
    fi
    uv_cmd=("$py" -m uv)
fi

for v in "${versions[@]}"; do
    venv=.venv; [ "$v" = 3.11 ] || venv=.venv-$v
    py=$(find_python "$v") || { echo "setup: Python $v not found" >&2; exit 1; }
    # A venv made by an older setup (pip) is replaced rather than patched.
    if [ -x "$venv/bin/python" ] && [ ! -f "$venv/pyvenv.cfg" -o -z "$(grep -s '^uv' "$venv/pyvenv.cfg")" ]; then
        echo "setup: replacing $venv (not made by uv)"
        rm -rf "$venv"
    fi
    # --compile-bytecode: the suite and the demo start hundreds of Python processes, and a
    # machine with PYTHONDONTWRITEBYTECODE set (or a read-only site-packages) would otherwise
    # compile every dependency from source in each of them (DBOS and SQLAlchemy alone take
    # 2.5 s of CPU uncompiled, 0.8 s compiled). uv compiles the whole environment each time
    # it is asked (~9 s), so only when the lock or a pyproject changed since it last did.
    compiled=$venv/.roboz-bytecode
    compile=()
    if [ ! -f "$compiled" ] || [ uv.lock -nt "$compiled" ] || [ pyproject.toml -nt "$compiled" ] \
        || [ helper/pyproject.toml -nt "$compiled" ]; then
        compile=(--compile-bytecode)
    fi
    ROBOZ_HELPER_REQUIRE_INIT=1 UV_PROJECT_ENVIRONMENT=$venv "${uv_cmd[@]}" sync --quiet --locked --dev \
        "${compile[@]}" --python "$py"
    [ ${#compile[@]} = 0 ] || touch "$compiled"
done

# The AG-UI test drives `roboz serve` with the real @ag-ui/client from npm, installed from its
# lock into the test's own folder; `npm ci` runs again only when the lock is newer.
agui=tests/server/agui/node
if command -v npm >/dev/null; then
    if [ ! -f "$agui/node_modules/.package-lock.json" ] \
        || [ "$agui/package-lock.json" -nt "$agui/node_modules/.package-lock.json" ]; then
        echo "setup: installing the AG-UI test's npm packages"
        (cd "$agui" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    fi
else
    echo "setup: please install Node.js 20 and npm (the AG-UI client test needs them)" >&2
fi
