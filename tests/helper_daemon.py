"""Start and stop a real roboz-helper daemon for tests, through pytest-xprocess.

Shared by every test area that needs the daemon, each with its own policy and scripts.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from xprocess import ProcessStarter


def wait_for_socket(path: str, timeout: float = 30.0, proc: Any = None) -> None:
    """Poll until something accepts on ``path``; the bound only stops a hung start-up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"helper exited early with status {proc.returncode}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                time.sleep(0.05)
    raise TimeoutError(f"helper socket {path} did not come up")


def serve_command(policy: Path, socket_path: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "roboz_helper",
        "serve",
        "--policy",
        str(policy),
        "--socket",
        socket_path,
    ]


@contextmanager
def running_helper(xprocess: Any, label: str, policy: Path, socket_path: str) -> Iterator[Path]:
    """Run the daemon on ``policy`` until the block ends; yields the daemon's log path."""

    class Starter(ProcessStarter):  # type: ignore[misc]
        pattern = "roboz-helper ready on"
        args = serve_command(policy, socket_path)
        timeout = 60
        terminate_on_interrupt = True
        env: ClassVar[dict[str, str]] = {**os.environ, "PYTHONUNBUFFERED": "1"}

        def startup_check(self) -> bool:
            wait_for_socket(socket_path, timeout=5)
            return True

    # xprocess keeps process records in the checkout's .pytest_cache; a fixed name would let a
    # concurrent pytest session in the same checkout terminate this session's daemon.
    name = f"{label}_{os.getpid()}"
    _, log_path = xprocess.ensure(name, Starter, restart=True)
    try:
        yield Path(log_path)
    finally:
        xprocess.getinfo(name).terminate()
