"""Processes forked from a server that imported the library already (``tests/forkserver.py``):
the CLI (``tests/cli/helpers.run_cli``) and the docs' Python blocks run there.

Each is a real process, as a fresh interpreter would be: its own pid and session, the
caller's arguments, working directory, environment and input, a real exit status (a signal's
too). What it saves is the import: a fresh interpreter spent 0.3-0.7 s of CPU importing before
it ran anything (over 100 s of CPU in a full pass); a fork costs milliseconds.

``run`` falls back to a fresh interpreter when a child would differ from one: an environment
whose interpreter settings (``PYTHON*`` but ``PYTHONPATH``) are not the server's. Set
``ROBOZ_TEST_FORKSERVER=0`` to start every process fresh (to rule the server out).
"""

from __future__ import annotations

import array
import atexit
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

SERVER_SCRIPT = Path(__file__).with_name("forkserver.py")


def _settings(env: dict[str, str]) -> dict[str, str]:
    """What an interpreter reads of its environment as it starts (PYTHONPATH the child applies
    itself, as a fresh interpreter would)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}


def _text(stream: IO[bytes]) -> str:
    """As subprocess.run(text=True) decodes: the locale's encoding, universal newlines."""
    stream.seek(0)
    text = stream.read().decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


class ForkServer:
    """One per pytest worker: started on first use, ended with the worker (its socket closes)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.environment = dict(os.environ)
        self.process = subprocess.Popen(
            # -P: not this folder first on its path (tests/mcp would be imported as mcp).
            [sys.executable, "-P", str(SERVER_SCRIPT), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        theirs.close()
        assert self.process.stdout is not None
        if self.process.stdout.readline() != "ready\n":
            self.process.kill()
            raise RuntimeError(f"the fork server did not start (exit {self.process.wait()})")
        self.control = ours
        self.lock = threading.Lock()
        atexit.register(self.close)

    def run(
        self,
        command: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: str = "",
        timeout: float,
    ) -> subprocess.CompletedProcess[str]:
        """``command``: ``["-m", "roboz.cli", ARGS...]`` or ``[SCRIPT, ARGS...]``, as after
        ``python``; raises subprocess.TimeoutExpired after killing a child that outlived
        ``timeout``."""
        with (
            tempfile.TemporaryFile() as given,
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            self.lock,
        ):
            given.write(stdin.encode(locale.getpreferredencoding(False)))
            given.seek(0)
            request = {"command": command, "cwd": str(cwd), "env": env}
            fds = array.array("i", [given.fileno(), out.fileno(), err.fileno()])
            self.control.settimeout(None)
            self.control.sendmsg(
                [json.dumps(request).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            )
            pid = self._answer()["pid"]
            self.control.settimeout(timeout)
            try:
                status = self._answer()["status"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self.control.settimeout(None)
                self._answer()
                raise subprocess.TimeoutExpired(
                    [sys.executable, *command], timeout, _text(out), _text(err)
                ) from None
            return subprocess.CompletedProcess(
                [sys.executable, *command],
                os.waitstatus_to_exitcode(status),
                _text(out),
                _text(err),
            )

    def _answer(self) -> dict[str, int]:
        message = self.control.recv(4096)
        if not message:
            raise RuntimeError(f"the fork server ended (exit {self.process.wait()})")
        answer: dict[str, int] = json.loads(message)
        return answer

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_server: ForkServer | None = None
_server_lock = threading.Lock()


def fork_server() -> ForkServer | None:
    """This worker's server, or None when ROBOZ_TEST_FORKSERVER=0."""
    global _server
    if os.environ.get("ROBOZ_TEST_FORKSERVER", "1") == "0":
        return None
    with _server_lock:
        if _server is None:
            _server = ForkServer()
        return _server


def run(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: str = "",
    timeout: float,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python COMMAND`` in ``cwd`` with exactly ``env``, its output captured as text: forked
    when a child would be what a fresh interpreter is, else (or when ``fresh``) a fresh one."""
    server = None if fresh else fork_server()
    if server is not None and _settings(env) == _settings(server.environment):
        return server.run(command, cwd=cwd, env=env, stdin=stdin, timeout=timeout)
    return subprocess.run(
        [sys.executable, *command],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        # No controlling terminal, as the forked ones: password prompts read the piped stdin.
        start_new_session=True,
    )


__all__ = ["ForkServer", "fork_server", "run"]
