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
from typing import IO, Any

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


class ForkedProcess:
    """A child of the fork server, with the part of ``subprocess.Popen``'s interface the tests
    use: ``pid``, ``args``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``,
    ``kill``, ``communicate`` and the pipes ``stdin``, ``stdout``, ``stderr``."""

    def __init__(
        self,
        args: list[str],
        answers: socket.socket,
        pipes: tuple[IO[Any] | None, IO[Any] | None, IO[Any] | None],
    ) -> None:
        self.args = args
        self._answers = answers
        self.stdin, self.stdout, self.stderr = pipes
        self.returncode: int | None = None
        self.pid = self._answer(None)["pid"]

    def _answer(self, timeout: float | None) -> dict[str, int]:
        self._answers.settimeout(timeout)
        message = self._answers.recv(4096)
        if not message:
            raise RuntimeError("the fork server ended")
        answer: dict[str, int] = json.loads(message)
        return answer

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                status = self._answer(timeout)["status"]
            except (BlockingIOError, TimeoutError):  # BlockingIOError: timeout 0
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self.returncode = os.waitstatus_to_exitcode(status)
            self._answers.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Closes stdin, reads stdout and stderr to their end (beside each other, so that
        neither pipe fills) and closes them, waits."""
        if self.stdin is not None:
            self.stdin.close()
        read: dict[str, Any] = {}

        def drain(name: str, stream: IO[Any] | None) -> None:
            if stream is not None:
                with stream:
                    read[name] = stream.read()

        readers = [
            threading.Thread(target=drain, args=(name, stream), daemon=True)
            for name, stream in (("out", self.stdout), ("err", self.stderr))
        ]
        for reader in readers:
            reader.start()
        self.wait(timeout)
        for reader in readers:
            reader.join(timeout)
        return read.get("out"), read.get("err")


class ForkServer:
    """One per pytest worker: started on first use, ended with the worker (its socket closes,
    and the server kills the children still running)."""

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

    def spawn(
        self, command: list[str], *, cwd: Path, env: dict[str, str], stdio: tuple[int, int, int]
    ) -> socket.socket:
        """Fork a child running ``python COMMAND`` on the descriptors ``stdio``; the socket
        of the answers about it (its pid, then its wait status)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = {"command": command, "cwd": str(cwd), "env": env}
        fds = array.array("i", [theirs.fileno(), *stdio])
        with self.lock:
            self.control.sendmsg(
                [json.dumps(request).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            )
        theirs.close()
        return ours

    def popen(
        self,
        command: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        text: bool = False,
    ) -> ForkedProcess:
        """As ``subprocess.Popen`` takes them: ``PIPE``, ``DEVNULL``, ``STDOUT`` (stderr), a
        file object or descriptor, or None (this process's own)."""
        ends: list[int] = []  # the child's ends, closed here once it has them
        pipes: list[IO[Any] | None] = []
        chosen: list[int] = []
        for index, spec in enumerate((stdin, stdout, stderr)):
            mine: IO[Any] | None = None
            if spec == subprocess.PIPE:
                read, write = os.pipe()
                child, parent = (read, write) if index == 0 else (write, read)
                mode = ("w" if index == 0 else "r") + ("" if text else "b")
                mine = open(parent, mode)  # noqa: SIM115  (the caller closes it)
                ends.append(child)
            elif spec == subprocess.DEVNULL:
                child = os.open(os.devnull, os.O_RDWR)
                ends.append(child)
            elif spec == subprocess.STDOUT:
                child = chosen[1]
            elif spec is None:
                child = index
            else:
                child = spec if isinstance(spec, int) else spec.fileno()
            chosen.append(child)
            pipes.append(mine)
        try:
            answers = self.spawn(command, cwd=cwd, env=env, stdio=(chosen[0], chosen[1], chosen[2]))
        finally:
            for fd in ends:
                os.close(fd)
        return ForkedProcess([sys.executable, *command], answers, (pipes[0], pipes[1], pipes[2]))

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
        ):
            given.write(stdin.encode(locale.getpreferredencoding(False)))
            given.seek(0)
            child = self.popen(command, cwd=cwd, env=env, stdin=given, stdout=out, stderr=err)
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(
                    child.args, timeout, _text(out), _text(err)
                ) from None
            assert child.returncode is not None
            return subprocess.CompletedProcess(child.args, child.returncode, _text(out), _text(err))

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


def forkable(env: dict[str, str], server: ForkServer) -> bool:
    return _settings(env) == _settings(server.environment)


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
    if server is not None and forkable(env, server):
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


Process = ForkedProcess | subprocess.Popen[Any]
"""What ``popen`` gives."""


def popen(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
) -> Process:
    """``subprocess.Popen([python, *COMMAND], ...)`` for a long-running child (a server, a
    worker): forked when it can be, in its own session either way."""
    server = fork_server()
    if server is not None and forkable(env, server):
        return server.popen(
            command, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, text=text
        )
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        text=text,
        start_new_session=True,
    )


__all__ = ["ForkServer", "ForkedProcess", "Process", "fork_server", "popen", "run"]
