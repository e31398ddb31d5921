"""The REAL SafeScripts helper daemon for capability tests, started with pytest-xprocess.

Mirrors tests/helper/conftest.py with a smaller policy: uid 0 (this test process) may run the
scripts below as nobody. Files live under /var/tmp because every run gets a private /tmp.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from xprocess import ProcessStarter

NOBODY = 65534

SCRIPTS: dict[str, str] = {
    "greet.sh": '#!/bin/sh\n# Greet the people named in the arguments.\necho "hello $*"\nid -u\n',
    "fail.sh": '#!/bin/sh\n# Complain on stderr and exit with the given status.\necho "oops" >&2\nexit "$1"\n',
    "chatty.sh": (
        "#!/bin/sh\n# Print a numbered line per argument count.\n"
        'i=1; while [ $i -le "$1" ]; do echo "line $i"; i=$((i+1)); done\n'
    ),
}


@dataclass(frozen=True)
class Helper:
    socket_path: str
    base: Path


def _policy(base: Path, socket_path: str) -> str:
    return f"""
[server]
socket = "{socket_path}"
socket_mode = 0o600

[[clients]]
uid = 0
profile = "agent"

[profiles.agent]
run_as_user = "nobody"
scripts_dir = "{base / "scripts"}"
workdir = "{base / "work"}"
network = "none"
env = {{ PATH = "/usr/bin:/bin", LANG = "C.UTF-8" }}
timeout_s = 30.0
max_output_bytes = 1048576
"""


def _wait_for_socket(path: str, timeout: float) -> None:
    # Bounds a hung start-up only; nothing here measures speed.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                time.sleep(0.05)
    raise TimeoutError(f"helper socket {path} did not come up")


@pytest.fixture(scope="session")
def _capabilities_helper(xprocess: object) -> Iterator[Helper]:
    base = Path(tempfile.mkdtemp(prefix="roboz-capabilities-", dir="/var/tmp"))
    base.chmod(0o755)
    (base / "scripts").mkdir()
    for name, text in SCRIPTS.items():
        script = base / "scripts" / name
        script.write_text(text)
        script.chmod(0o755)
    (base / "work").mkdir()
    os.chown(base / "work", NOBODY, NOBODY)
    socket_path = str(base / "helper.sock")
    policy = base / "policy.toml"
    policy.write_text(_policy(base, socket_path))

    class Starter(ProcessStarter):
        pattern = "roboz-helper ready on"
        args: ClassVar[list[str]] = [
            sys.executable,
            "-m",
            "roboz_helper",
            "serve",
            "--policy",
            str(policy),
        ]
        timeout = 60
        terminate_on_interrupt = True
        env: ClassVar[dict[str, str]] = {**os.environ, "PYTHONUNBUFFERED": "1"}

        def startup_check(self) -> bool:
            _wait_for_socket(socket_path, timeout=5)
            return True

    xprocess.ensure("roboz_capabilities_helper", Starter, restart=True)  # type: ignore[attr-defined]
    try:
        yield Helper(socket_path=socket_path, base=base)
    finally:
        xprocess.getinfo("roboz_capabilities_helper").terminate()  # type: ignore[attr-defined]
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def helper(needs_root: None, request: pytest.FixtureRequest) -> Helper:
    """Requesting needs_root first makes this skip (or fail in CI) before starting a daemon."""
    daemon: Helper = request.getfixturevalue("_capabilities_helper")
    return daemon
