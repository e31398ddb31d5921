"""The REAL SafeScripts helper daemon for capability tests, started with pytest-xprocess.

Like tests/helper/conftest.py, with a smaller policy: uid 0 (this test process) may run the
scripts below as nobody. Files live under /var/tmp because every run gets a private /tmp.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helper_daemon import running_helper

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

    try:
        with running_helper(xprocess, "roboz_capabilities_helper", policy, socket_path):
            yield Helper(socket_path=socket_path, base=base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def helper(needs_root: None, request: pytest.FixtureRequest) -> Helper:
    """Requesting needs_root first makes this skip (or fail in CI) before starting a daemon."""
    daemon: Helper = request.getfixturevalue("_capabilities_helper")
    return daemon
