"""Running an external binary: no shell, a clean environment, a deadline and an output cap."""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass
class Outcome:
    status: int
    stdout: bytes = b""
    stderr: bytes = b""
    note: str = ""
    """Why the engine stopped the command (timeout, output cap), if it did."""


class MissingBinary(Exception):
    """The command's program is not installed."""


def find_binary(name: str) -> str:
    """The absolute path of ``name`` on the host's PATH; MissingBinary if absent."""
    found = shutil.which(name, path=os.environ.get("PATH") or SAFE_PATH)
    if found is None:
        raise MissingBinary(
            f"{name}: the program is not installed on this machine; use another command "
            "(for example grep -r instead of rg)"
        )
    return found


def run_binary(
    argv: list[str],
    *,
    stdin: bytes,
    pass_fds: tuple[int, ...],
    timeout: float,
    output_limit: int,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run ``argv`` (argv[0] absolute) and collect its output within the limits."""
    environment = {"PATH": SAFE_PATH, "LC_ALL": "C.UTF-8"}
    if env:
        environment.update(env)
    process = subprocess.Popen(
        [os.path.basename(argv[0]), *argv[1:]],
        executable=argv[0],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
        cwd=cwd,
        env=environment,
        start_new_session=True,
    )
    assert process.stdin and process.stdout and process.stderr
    selector = selectors.DefaultSelector()
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    out: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = dict.fromkeys(out, 0)
    for stream in (process.stdout, process.stderr):
        os.set_blocking(stream.fileno(), False)
        selector.register(stream.fileno(), selectors.EVENT_READ)
    pending = memoryview(stdin)
    stdin_fd = process.stdin.fileno()
    if pending:
        os.set_blocking(stdin_fd, False)
        selector.register(stdin_fd, selectors.EVENT_WRITE)
    else:
        process.stdin.close()
    deadline = time.monotonic() + timeout
    note = ""
    open_streams = 2
    try:
        while open_streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                note = f"timed out after {timeout:g} s and was stopped"
                break
            for key, _events in selector.select(remaining):
                fd = key.fd
                if fd == stdin_fd:
                    try:
                        written = os.write(fd, pending[:65536])
                    except BrokenPipeError:
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(fd)
                        process.stdin.close()
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    open_streams -= 1
                    continue
                out[fd].append(chunk)
                sizes[fd] += len(chunk)
                if sizes[fd] > output_limit:
                    note = (
                        f"produced more than {output_limit} bytes of output and was stopped; "
                        "narrow the command (a more specific path or pattern, -m, -maxdepth, "
                        "head)"
                    )
                    open_streams = 0
                    break
    finally:
        selector.close()
        if note:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        if not process.stdin.closed:
            process.stdin.close()
        status = process.wait()
        process.stdout.close()
        process.stderr.close()
    stdout, stderr = b"".join(out[out_fd]), b"".join(out[err_fd])
    if note:
        status = status if status > 0 else 124
    return Outcome(status, stdout[:output_limit], stderr[:output_limit], note)
