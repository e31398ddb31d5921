#!/usr/bin/env bash
# The test command README.md gives and CI runs: set-up, lint, then on every supported Python the
# type checks (mypy, pyright, the type tests) and the whole suite, all in environments synced
# from uv.lock. The suite runs on every core (pytest-xdist); the type checks run beside it,
# since the suite spends much of its time waiting on daemons, sandboxes and PostgreSQL.
# Every phase prints a banner with its Python and the elapsed time; a table of phase timings
# closes the run. See docs/testing.md.
#
# Usage: scripts/test.sh [--quick] [PYTEST ARGS...]
#   --quick  lint and the suite on Python 3.11 only, without the tests marked slow
#            (no type checks, no 3.13): the loop while working; CI runs the full command.
#   PYTEST ARGS go to pytest unchanged (e.g. scripts/test.sh -k chain, or -n 0 for one process).
#   ROBOZ_TEST_WORKERS=N sets the number of pytest workers (default: one more than cores).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done

start=$SECONDS
# The repository's own modules (src, helper, tests) are compiled once and cached like the
# dependencies (setup.sh compiles those): with PYTHONDONTWRITEBYTECODE set, every process the
# suite starts would compile them from source again.
unset PYTHONDONTWRITEBYTECODE
logs=$(mktemp -d "${TMPDIR:-/tmp}/roboz-test.XXXXXX")
# A run that ends early (Ctrl-C, a failed set-up) ends its background phases and everything
# they started, by pid, so that no type checker or environment sync is left running.
background=()
kill_tree() {
    local child
    for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}
cleanup() {
    local pid
    for pid in "${background[@]}"; do kill_tree "$pid"; done
    rm -rf "$logs"
}
trap cleanup EXIT
trap 'echo; echo "test.sh: interrupted" >&2; exit 130' INT TERM

clock() { printf '%d:%02d' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

# Each phase leaves $logs/NAME.rc (its exit status) and $logs/NAME.s (its seconds).
phase_names=()
run_phase() { # NAME COMMAND...: in the foreground, its output on the terminal
    local name=$1 began=$SECONDS rc=0
    shift
    phase_names+=("$name")
    echo "== [$(clock)] $name"
    "$@" || rc=$?
    echo $((SECONDS - began)) >"$logs/$name.s"
    echo "$rc" >"$logs/$name.rc"
    return $rc
}
phase_in_background() { # NAME COMMAND...: its output in $logs/NAME.log, shown at the end
    local name=$1
    shift
    phase_names+=("$name")
    echo "== [$(clock)] $name: started beside the other phases, output at the end"
    (
        began=$SECONDS rc=0
        "$@" >"$logs/$name.log" 2>&1 || rc=$?
        echo $((SECONDS - began)) >"$logs/$name.s"
        echo "$rc" >"$logs/$name.rc"
    ) &
    background+=($!)
}
wait_for() { # NAME: until that phase has finished; returns its exit status
    local said=0
    until [ -f "$logs/$1.rc" ]; do
        [ $said = 1 ] || echo "== [$(clock)] waiting for $1"
        said=1
        sleep 1
    done
    return "$(cat "$logs/$1.rc")"
}

summary() { # the output of background phases, then one line per phase; the run's status
    local name rc seconds verdict status=0
    for name in "${phase_names[@]}"; do
        if [ -s "$logs/$name.log" ]; then
            echo "== output of $name"
            cat "$logs/$name.log"
        fi
    done
    echo "== phase timings (total $(clock), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
    for name in "${phase_names[@]}"; do
        rc=$(cat "$logs/$name.rc" 2>/dev/null || echo "not run")
        seconds=$(cat "$logs/$name.s" 2>/dev/null || echo "-")
        case $rc in
            0) verdict=ok ;;
            "not run") verdict="not finished"; status=1 ;;
            *) verdict="FAILED (exit $rc)"; status=1 ;;
        esac
        printf '  %-22s %5ss  %s\n' "$name" "$seconds" "$verdict"
    done
    return $status
}

python_version() { "$1/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

lint() {
    .venv/bin/ruff check . && .venv/bin/ruff format --check src helper tests benchmarks
}

type_checks() { # VENV: mypy and pyright on the library, then the type tests
    local venv=$1 version
    version=$(python_version "$venv")
    echo "-- type checks on Python $version"
    "$venv/bin/mypy" --python-version "$version"
    "$venv/bin/pyright" --pythonpath "$venv/bin/python" --pythonversion "$version"
    VENV=$venv scripts/run_type_tests.sh
}

all_type_checks() {
    type_checks .venv
    wait_for "setup 3.13" >/dev/null || { echo "no Python 3.13 environment: setup 3.13 failed"; return 1; }
    type_checks .venv-3.13
}

# One worker more than cores: a worker spends much of a test waiting (on daemons, sandboxes,
# PostgreSQL, the processes it starts), and the third fills those waits (on 2 cores the 3.13
# pass took 223 s with three workers, 273 s with two, 250 s with four).
workers=${ROBOZ_TEST_WORKERS:-$(($(nproc) + 1))}
pytest_phase() { # VENV [MORE PYTEST ARGS...]
    local venv=$1 rc=0 serial_rc=0
    shift
    # loadgroup: the tests of one xdist_group (a shared daemon, a fixed resource) run on one
    # worker, one after the other; every other test goes to whichever worker is free.
    local once=()
    # The batteries marked once (tests/conftest.py ONCE: browsers, benchmark scripts, a type
    # checker on generated code) do not depend on this Python: the first one runs them.
    [ "$venv" != .venv ] && once=(-m "not once")
    ROBOZ_TEST_PASS=parallel "$venv/bin/python" -m pytest -q -n "$workers" --dist loadgroup \
        "${once[@]}" "$@" || rc=$?
    if [ $quick = 1 ]; then
        serial_rc=5 # the SERIAL batteries are all slow: --quick leaves them out
    elif [ "$venv" != .venv ]; then
        # Once, on the first Python: they prove process handling (workers killed, PostgreSQL
        # restarted) against deadlines and take minutes of waiting; the durable tests of the
        # parallel pass run the same code on this Python.
        serial_rc=5
    else
        # Then, alone on the machine, the batteries that must not share it (tests/conftest.py
        # SERIAL); they are slow, so --quick has none of them.
        echo "-- [$(clock)] the tests that run alone (tests/conftest.py SERIAL)"
        ROBOZ_TEST_PASS=serial "$venv/bin/python" -m pytest -q -n 0 "$@" || serial_rc=$?
    fi
    # Exit 5 (no test) is fine for one pass as long as the other ran tests; for both it is not.
    if [ $rc = 5 ] && [ $serial_rc = 5 ]; then
        echo "test.sh: pytest collected no test on Python $(python_version "$venv") (exit 5);" \
            "check the arguments: ${*:-(none)}" >&2
        return 5
    fi
    [ $rc = 5 ] && rc=0
    [ $serial_rc = 5 ] && serial_rc=0
    [ $rc != 0 ] && return $rc
    return $serial_rc
}

# Without an environment nothing else can run: stop there.
run_phase "setup 3.11" scripts/setup.sh 3.11 || { summary; exit 1; }
if [ $quick = 0 ]; then
    # The 3.13 environment syncs while 3.11 is linted and tested.
    phase_in_background "setup 3.13" scripts/setup.sh 3.13
fi
run_phase lint lint || true
if [ $quick = 0 ]; then
    # The site builds with warnings as errors (its code blocks run in pytest, tests/docs).
    run_phase docs scripts/docs.sh --quiet || true
fi
if [ $quick = 1 ]; then
    run_phase "pytest 3.11 quick" pytest_phase .venv -m "not slow" "$@" || true
else
    phase_in_background "types 3.11, 3.13" all_type_checks
    run_phase "pytest 3.11" pytest_phase .venv "$@" || true
    if wait_for "setup 3.13"; then
        run_phase "pytest 3.13" pytest_phase .venv-3.13 "$@" || true
    fi
    wait_for "types 3.11, 3.13" || true
fi
summary
