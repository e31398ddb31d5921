"""Processes forked from the fork server (tests/forked.py) behave as fresh interpreters do: the
same exit status and output for the same arguments, working directory, environment and input,
pipes and signals as subprocess.Popen has them. The CLI, docs, server and durable tests rely on
it; this holds it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests import forked
from tests.cli.helpers import run_cli

CASES: dict[str, tuple[list[str], dict[str, str], str | None]] = {
    "version": (["--version"], {}, None),
    "unknown command": (["frobnicate"], {}, None),
    "a path relative to the working directory": (
        ["threads", "list", "--store", "x/t.db"],
        {},
        None,
    ),
    # The environment of the call, not the server's: ROBOZ_DEBUG adds the traceback.
    "the environment": (["threads", "list", "--store", "nope/t.db"], {"ROBOZ_DEBUG": "1"}, None),
    # Its own session, with no controlling terminal: piped input is never taken as a password.
    "input and no terminal": (["env", "encrypt", "--secret", "A"], {}, "pw\npw\n"),
    "PYTHONPATH": (["serve", "--app", "agents_here:missing", "--port", "0"], {}, None),
}


@pytest.mark.parametrize("case", CASES)
def test_a_forked_command_is_a_fresh_one(tmp_path: Path, case: str) -> None:
    args, env, stdin = CASES[case]
    (tmp_path / "x").mkdir()
    (tmp_path / ".env").write_text("A=1\n")
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "agents_here.py").write_text("agents = None\n")
    env = {**env, "PYTHONPATH": str(modules)} if case == "PYTHONPATH" else env

    forked = run_cli(*args, cwd=tmp_path, env=env, stdin=stdin)
    fresh = run_cli(*args, cwd=tmp_path, env=env, stdin=stdin, fresh=True)

    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )
    assert forked.returncode != 0 or forked.stdout  # each case says something


def test_a_command_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    server = forked.fork_server()
    if server is None:
        pytest.skip("the fork server is off (ROBOZ_TEST_FORKSERVER=0)")
    # A helper socket that takes the connection and never answers: the command waits.
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(str(path))
        silent.listen()
        with pytest.raises(subprocess.TimeoutExpired):
            server.run(
                ["-m", "roboz.cli", "scripts", "check", "--socket", str(path)],
                cwd=tmp_path,
                env=dict(os.environ),
                timeout=2,
            )
    # The server answers the next call.
    assert run_cli("--version", cwd=tmp_path).returncode == 0


def test_a_script_runs_as_python_runs_it(tmp_path: Path) -> None:
    script = tmp_path / "sub" / "example.py"
    script.parent.mkdir()
    (script.parent / "neighbour.py").write_text("WORD = 'next door'\n")
    script.write_text(
        "import os, sys\n"
        "import neighbour\n"  # the script's folder is first on the path
        "print(__name__, neighbour.WORD, sys.argv[1:], os.getcwd(), os.environ['MINE'])\n"
        "print(input())\n"
        "raise SystemExit(3)\n"
    )
    env = {**os.environ, "MINE": "mine"}
    runs = [
        forked.run([str(script), "a"], cwd=tmp_path, env=env, stdin="typed\n", timeout=60, fresh=f)
        for f in (False, True)
    ]

    assert runs[0].returncode == runs[1].returncode == 3
    assert runs[0].stdout == runs[1].stdout == f"__main__ next door ['a'] {tmp_path} mine\ntyped\n"
    assert runs[0].stderr == runs[1].stderr == ""


def test_a_long_running_child_has_pipes_signals_and_its_exit_status(tmp_path: Path) -> None:
    script = tmp_path / "echo_lines.py"
    script.write_text(
        "import sys\n"
        "print('ready', flush=True)\n"
        "for line in sys.stdin:\n"
        "    print('got', line.strip(), flush=True)\n"
        "print('bye', file=sys.stderr)\n"
    )
    env = dict(os.environ)
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}

    # Ended by its input: what it printed and exit 0.
    child = forked.popen([str(script)], cwd=tmp_path, env=env, text=True, **pipes)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    assert child.poll() is None
    assert child.stdin is not None
    child.stdin.write("one\n")
    child.stdin.flush()
    assert child.stdout.readline() == "got one\n"
    out, err = child.communicate(timeout=60)
    assert (child.returncode, out, err) == (0, "", "bye\n")

    # Ended by signals, as a fresh process is: the status says which.
    for signum in (signal.SIGTERM, signal.SIGKILL):
        child = forked.popen([str(script)], cwd=tmp_path, env=env, text=True, **pipes)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.2)
        child.terminate() if signum == signal.SIGTERM else child.kill()
        assert child.wait(60) == -signum
        child.communicate(timeout=60)


def test_children_left_running_are_killed_when_their_server_ends(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(600)\n")
    server = forked.ForkServer()  # a server of this test's own, ended below
    child = server.popen([str(tmp_path / "sleeper.py")], cwd=tmp_path, env=dict(os.environ))
    assert child.poll() is None and os.path.exists(f"/proc/{child.pid}")

    server.close()

    # Killed and reaped by the server as it ended: not even a zombie is left.
    deadline = time.monotonic() + 60
    while os.path.exists(f"/proc/{child.pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child.pid}")
