"""A REAL SafeScripts helper daemon for the Shed's tests, with scripts the test area chooses.

uid 0 (this test process) may run the scripts as nobody. Files live under /var/tmp because
every run gets a private /tmp, which would hide a workdir placed there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helper_daemon import running_helper

NOBODY = 65534


@dataclass(frozen=True)
class Helper:
    socket_path: str
    base: Path
    log_path: Path


def _policy(base: Path, socket_path: str, commands: Sequence[str], max_output_bytes: int) -> str:
    listed = ", ".join(f'"{command}"' for command in commands)
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
commands = [{listed}]
env = {{ PATH = "/usr/bin:/bin", LANG = "C.UTF-8" }}
timeout_s = 30.0
max_output_bytes = {max_output_bytes}
"""


@contextmanager
def serving(
    xprocess: object,
    label: str,
    scripts: dict[str, str],
    *,
    commands: Sequence[str] = (),
    max_output_bytes: int = 1 << 20,
) -> Iterator[Helper]:
    """Run a daemon serving ``scripts`` (name -> text) until the block ends."""
    base = Path(tempfile.mkdtemp(prefix=f"{label}-", dir="/var/tmp"))
    base.chmod(0o755)
    (base / "scripts").mkdir()
    for name, text in scripts.items():
        script = base / "scripts" / name
        script.write_text(text)
        script.chmod(0o755)
    (base / "work").mkdir()
    os.chown(base / "work", NOBODY, NOBODY)
    socket_path = str(base / "helper.sock")
    policy = base / "policy.toml"
    policy.write_text(_policy(base, socket_path, commands, max_output_bytes))
    try:
        with running_helper(xprocess, label, policy, socket_path) as log_path:
            yield Helper(socket_path=socket_path, base=base, log_path=log_path)
    finally:
        shutil.rmtree(base, ignore_errors=True)
