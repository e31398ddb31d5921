"""A throw-away SafeScripts helper: a policy in a temporary directory and a real daemon on it.

The daemon is the real ``roboz_helper`` in its own process. As root it runs each script as
``nobody``; otherwise it runs rootless, in a user namespace (see the helper's README).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path

NOBODY_UID = 65534
START_TIMEOUT_S = 30.0

POLICY = """\
[server]
socket = "{socket}"
max_connections = 8
max_runs_per_client = 2
handshake_timeout_s = 5.0
socket_mode = 0o600

[[clients]]
uid = {client_uid}
profile = "demo"

[profiles.demo]
run_as_user = "nobody"
scripts_dir = "{scripts}"
workdir = "{work}"
network = "none"
commands = []
env = {{ PATH = "/usr/bin:/bin", LANG = "C.UTF-8" }}
timeout_s = 20.0
max_output_bytes = 1048576
pids_max = 64
memory_max_bytes = 268435456
tmp_size_bytes = 16777216
max_file_bytes = 16777216
nofile_max = 256
cpu_time_s = 20
"""


class HelperStartError(RuntimeError):
    """The helper did not come up; the message carries what it printed."""


@dataclass(frozen=True)
class LocalHelper:
    base: Path
    socket_path: str
    scripts_dir: Path
    workdir: Path
    policy_path: Path


@contextlib.contextmanager
def local_helper(
    scripts: Mapping[str, str], workdir: Path | None = None
) -> Generator[LocalHelper, None, None]:
    """Write ``scripts`` and a policy under a fresh directory, serve them, clean up after.
    ``workdir`` (e.g. the agent's project) is the runs' working directory; by default a
    fresh one next to the scripts."""
    # /var/tmp, not /tmp: every run gets a private /tmp, which would hide a workdir there.
    base = Path(tempfile.mkdtemp(prefix="roboz-demo-", dir="/var/tmp"))
    base.chmod(0o755)
    try:
        helper = _prepare(base, scripts, workdir)
        # A file, not a pipe: nobody reads a pipe while the demo runs, and a full one would
        # block the daemon.
        log_path = base / "helper.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "roboz_helper",
                    "serve",
                    "--policy",
                    str(helper.policy_path),
                    "--log-level",
                    "WARNING",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        try:
            _wait_until_serving(helper.socket_path, process, log_path)
            yield helper
        finally:
            _stop(process)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _prepare(base: Path, scripts: Mapping[str, str], workdir: Path | None) -> LocalHelper:
    scripts_dir, work = base / "scripts", (workdir or base / "work")
    scripts_dir.mkdir(mode=0o755)  # the helper refuses scripts others could change
    work.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.chown(work, NOBODY_UID, NOBODY_UID)  # the runs' own user writes the workspace
    for name, text in scripts.items():
        path = scripts_dir / name
        path.write_text(text)
        path.chmod(0o755)
    socket_path = str(base / "helper.sock")
    policy = base / "policy.toml"
    policy.write_text(
        POLICY.format(socket=socket_path, client_uid=os.getuid(), scripts=scripts_dir, work=work)
    )
    return LocalHelper(base, socket_path, scripts_dir, work, policy)


def _wait_until_serving(path: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log_path.read_text(errors="replace").strip()
            raise HelperStartError(f"the helper exited with status {process.returncode}: {output}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                time.sleep(0.05)
    raise HelperStartError(f"the helper did not open {path} within {START_TIMEOUT_S:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # the helper cancels runs and removes its socket
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
