"""The real helper daemon in the test network's world namespace, for the egress suites and
bench_sandbox: it resolves names with the test's name server, and its runs reach the remote
namespace only through their proxy."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from roboz.shed.safe_scripts import SafeScriptsClient, ShellScriptResult
from tests.helper_daemon import wait_for_socket

from .netlab import REMOTE, Lab

NOBODY = 65534


@dataclass
class EgressHelper:
    lab: Lab
    base: Path
    socket_path: str
    policy: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def client(self, **settings: object) -> SafeScriptsClient:
        return SafeScriptsClient(self.socket_path, timeout=60, **settings)  # type: ignore[arg-type]

    def run(self, *argv: str, **settings: object) -> ShellScriptResult:
        return self.client(**settings).exec_command(list(argv))

    def py(self, code: str, **settings: object) -> ShellScriptResult:
        return self.run("/usr/bin/python3", "-c", textwrap.dedent(code), **settings)

    def write_policy(self, allow: str) -> None:
        ca = self.base / "ca" / "ca.pem"
        self.policy.write_text(f"""
[server]
socket = "{self.socket_path}"
max_runs_per_client = 8

[egress]
nameservers = ["{REMOTE}"]

[[clients]]
uid = 0
profile = "net"

[profiles.net]
run_as_user = "nobody"
scripts_dir = "{self.base / "scripts"}"
workdir = "{self.base / "work"}"
readonly_paths = ["{self.base / "ca"}"]
network = {{allow = {allow}}}
commands = ["/usr/bin/curl", "/usr/bin/git", "/usr/bin/python3", "/bin/sh"]
env = {{PATH = "/usr/bin:/bin", HOME = "/tmp", SSL_CERT_FILE = "{ca}", GIT_SSL_CAINFO = "{ca}"}}
timeout_s = 120.0
max_output_bytes = 16777216
memory_max_bytes = 536870912
pids_max = 128
""")

    def reload(self) -> None:
        assert self.proc is not None
        before = self.log.read_text().count("reloaded")
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while self.log.read_text().count("reloaded") == before:
            assert time.monotonic() < deadline, self.log.read_text()[-2000:]
            time.sleep(0.05)


@contextmanager
def running_helper(
    lab: Lab, allow: str, env: Mapping[str, str] = {}, label: str = "egress"
) -> Iterator[EgressHelper]:
    """The daemon on a policy whose profile "net" has ``allow`` (TOML), until the block ends."""
    base = Path(os.path.realpath(Path("/var/tmp") / f"roboz-{label}-{os.getpid()}"))
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755)
    (base / "scripts").mkdir(mode=0o755)
    fetch = base / "scripts" / "fetch.sh"
    fetch.write_text('#!/bin/sh\n# Fetch a URL.\ncurl -sS --fail "$1"\n')
    fetch.chmod(0o755)
    (base / "ca").mkdir(mode=0o755)
    shutil.copy(lab.ca.path, base / "ca" / "ca.pem")
    (base / "ca" / "ca.pem").chmod(0o644)
    (base / "work").mkdir()
    os.chown(base / "work", NOBODY, NOBODY)
    socket_path = str(base / "helper.sock")
    helper = EgressHelper(lab, base, socket_path, base / "policy.toml", base / "helper.log")
    helper.write_policy(allow)
    command = [sys.executable, "-m", "roboz_helper", "serve", "--policy", str(helper.policy),
               "--socket", socket_path, "--log-level", "INFO"]  # fmt: skip
    with open(helper.log, "wb") as out:
        helper.proc = subprocess.Popen(
            # nsenter, not `ip netns exec`: that one also remounts /sys, hiding the cgroups.
            # The usual soft limit of open files, which the daemon must raise itself.
            ["prlimit", "--nofile=1024:", "nsenter", f"--net=/run/netns/{lab.world.name}",
             *command],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )  # fmt: skip
    try:
        wait_for_socket(socket_path, timeout=60, proc=helper.proc)
        yield helper
    finally:
        helper.proc.send_signal(signal.SIGTERM)
        try:
            helper.proc.wait(30)
        except subprocess.TimeoutExpired:
            helper.proc.kill()
            helper.proc.wait()
        shutil.rmtree(base, ignore_errors=True)
