"""Run the roboz CLI as a real subprocess in a chosen directory: forked from the fork server
when it can be (``tests/forked.py``), else a fresh interpreter."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests import forked


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ROBOZ_ENV_PASSWORD", "ROBOZ_DEBUG")
    }
    environment.update(env or {})
    return environment


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python -m roboz.cli ARGS`` in ``cwd``, in its own session (no controlling terminal:
    password prompts read the piped stdin); ``fresh``: in a new interpreter, never forked."""
    return forked.run(
        ["-m", "roboz.cli", *args],
        cwd=cwd,
        env=_environment(env),
        stdin=stdin or "",
        timeout=120,
        fresh=fresh,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert result.returncode == code, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("roboz: error: ")]
    assert len(errors) == 1, result.stderr
    assert text in errors[0], result.stderr
    assert "Traceback" not in result.stderr


def _process_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as wchan, open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":\t", 1) for line in status.read().splitlines())
            signals = ", ".join(
                f"{k} {fields[k]}" for k in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn")
            )
            return f"state {fields['State']}, waiting in {wchan.read()}, {signals}"
    except (OSError, KeyError, ValueError) as error:
        return f"state unknown: {error}"


class Terminal:
    """The CLI on a real pseudo-terminal as its controlling terminal, as a person runs it.

    getpass reads the controlling terminal, not stdin, so prompts are answered here.
    """

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        environment = _environment(env)
        # A process that hangs is made to print where it is (SIGABRT, see finish).
        environment.setdefault("PYTHONFAULTHANDLER", "1")
        self._master, slave = os.openpty()

        def take_terminal() -> None:
            # As a shell starts a foreground job: SIGINT at its default, whatever this test
            # process inherited or set (an ignored or blocked signal would carry over exec).
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen(
            [sys.executable, "-m", "roboz.cli", *args],
            cwd=cwd,
            env=environment,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=take_terminal,
        )
        os.close(slave)
        self.screen = b""

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.screen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{text!r} never appeared: {self.screen!r}"
            ready, _, _ = select.select([self._master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self._master, 1024)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"{text!r} never appeared: {self.screen!r}"
                self.screen += chunk

    def type(self, line: str) -> None:
        os.write(self._master, line.encode() + b"\n")

    def finish(self, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        try:
            try:
                stdout, stderr = self.process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                # Its Python stack says where it hung; a bare timeout said nothing.
                state = _process_state(self.process.pid)
                self.process.send_signal(signal.SIGABRT)
                _, stderr = self.process.communicate(timeout=10)
                raise AssertionError(
                    f"no exit within {timeout}s ({state}); where it was:\n{stderr.decode()}"
                ) from None
        finally:
            if self.process.poll() is None:
                self.process.kill()
            os.close(self._master)
        return subprocess.CompletedProcess(
            self.process.args, self.process.returncode, stdout.decode(), stderr.decode()
        )
