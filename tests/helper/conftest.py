"""Fixtures that run the REAL helper daemon on a real Unix socket.

`helper` starts `python -m roboz_helper serve` once per session through pytest-xprocess, with a
policy and scripts directory built here. Its files live under /var/tmp rather than /tmp because
every run gets a private /tmp, which would hide a workdir placed there.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helper_daemon import running_helper, serve_command, wait_for_socket

NOBODY = 65534
MAX_CONNECTIONS = 8
MAX_RUNS_PER_CLIENT = 2
# Long enough that 200 connects finish while the first few still hold their slots.
HANDSHAKE_TIMEOUT_S = 3.0
# A second client (a forked child switches to this uid) gets small limits to hit them.
TIGHT_UID = 4242
TIGHT_TIMEOUT_S = 2.0
TIGHT_OUTPUT_BYTES = 10000
# Members of this supplementary group also get the tight profile (SO_PEERGROUPS end to end).
CLIENT_GROUP = 4343

SCRIPTS: dict[str, str] = {
    "hello.sh": '#!/bin/sh\n# Say hello to the arguments.\necho "hello $*"\nid -u\n',
    "fail.sh": '#!/bin/sh\n# Exit with the status given.\necho oops >&2\nexit "$1"\n',
    # Many numbered lines, stderr in between: order and separation must survive streaming.
    "lots.sh": (
        "#!/bin/sh\n# Print many numbered lines.\n"
        'i=1; while [ $i -le "$1" ]; do echo "line $i"; '
        'if [ $((i % 1000)) -eq 0 ]; then echo "err $i" >&2; fi; i=$((i+1)); done\n'
    ),
    # The marker argument shows up in the cmdline of the script and of both children, so the
    # host's /proc tells whether anything of this run survived; one child escapes with setsid.
    "sleeper.sh": (
        "#!/bin/sh\n# Sleep in three processes until killed.\n"
        "sh -c 'sleep 600' \"$1\" &\n"
        "setsid sh -c 'sleep 600' \"$1\" &\n"
        "echo ready\nwait\n"
    ),
    "selfkill.sh": "#!/bin/sh\n# Kill itself with a signal.\necho bye\nkill -9 $$\n",
    "sub/nested.sh": "#!/bin/sh\n\n# A script in a subdirectory.\necho nested\n",
    "nocomment.sh": "#!/bin/sh\necho no description\n",
}


@dataclass(frozen=True)
class HelperDaemon:
    socket_path: str
    base: Path
    workdir: Path
    scripts_dir: Path
    policy_path: Path
    log_path: Path | None = None


def policy_text(base: Path, socket_path: str, socket_mode: int = 0o666) -> str:
    # socket_mode 0o666: uid 65534 must reach the socket to be refused by the policy, which is
    # the point of the unknown-client test (file permissions would stop it earlier).
    return f"""
[server]
socket = "{socket_path}"
max_connections = {MAX_CONNECTIONS}
max_runs_per_client = {MAX_RUNS_PER_CLIENT}
handshake_timeout_s = {HANDSHAKE_TIMEOUT_S}
socket_mode = {socket_mode:#o}

[[clients]]
uid = 0
profile = "test"

[[clients]]
uid = {TIGHT_UID}
profile = "tight"

[[clients]]
gid = {CLIENT_GROUP}
profile = "tight"

[profiles.test]
run_as_user = "nobody"
scripts_dir = "{base / "scripts"}"
workdir = "{base / "work"}"
network = "none"
commands = ["/bin/echo", "/bin/sh"]
env = {{ PATH = "/usr/bin:/bin", LANG = "C.UTF-8" }}
timeout_s = 60.0
max_output_bytes = 16777216
pids_max = 64
memory_max_bytes = 268435456
tmp_size_bytes = 16777216
max_file_bytes = 16777216
nofile_max = 256
cpu_time_s = 60

[profiles.tight]
run_as_user = "nobody"
scripts_dir = "{base / "scripts"}"
workdir = "{base / "work"}"
timeout_s = {TIGHT_TIMEOUT_S}
max_output_bytes = {TIGHT_OUTPUT_BYTES}
"""


def build_tree(base: Path) -> None:
    """Scripts (root-owned, with every kind of thing the helper must refuse) and a workdir."""
    base.chmod(0o755)
    scripts = base / "scripts"
    (scripts / "sub").mkdir(parents=True)
    # Whatever the umask: the helper refuses scripts others than root could change.
    scripts.chmod(0o755)
    (scripts / "sub").chmod(0o755)
    for name, text in SCRIPTS.items():
        path = scripts / name
        path.write_text(text)
        path.chmod(0o755)
    (scripts / "notexec.sh").write_text("#!/bin/sh\n# Not executable.\necho no\n")
    (scripts / ".hidden.sh").write_text("#!/bin/sh\n# Hidden.\n")
    (scripts / ".hidden.sh").chmod(0o755)
    (scripts / "link.sh").symlink_to("hello.sh")
    (scripts / "escape.sh").symlink_to("/bin/sh")
    (scripts / "linkdir").symlink_to("sub")
    os.mkfifo(scripts / "pipe.sh", 0o755)
    # A name that is not UTF-8 must not break the listing of everything else.
    bad = os.open(bytes(scripts) + b"/bad\xff.sh", os.O_CREAT | os.O_WRONLY, 0o755)
    os.close(bad)
    work = base / "work"
    work.mkdir()
    os.chown(work, NOBODY, NOBODY)


def make_base(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))


def own_daemon_files(prefix: str, socket_mode: int = 0o666) -> tuple[Path, str, Path]:
    """A tree, socket path and policy for a test that starts (and stops) its own daemon."""
    base = make_base(prefix)
    build_tree(base)
    socket_path = str(base / "helper.sock")
    policy = base / "policy.toml"
    policy.write_text(policy_text(base, socket_path, socket_mode))
    return base, socket_path, policy


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll for an eventual state. Not a speed assertion: the bound only stops a hung test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains marker (any pid namespace: /proc is the host's)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def as_user(uid: int, gid: int, job: Callable[[], str], groups: tuple[int, ...] = ()) -> str:
    """Run job in a forked child that dropped to uid/gid; return what it returned.

    Forking (instead of starting an interpreter as that user) keeps the already imported
    client usable even where the interpreter's files are not readable by that user.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            os.write(write_end, job().encode())
            status = 0
        except BaseException as exc:
            os.write(write_end, f"child error: {exc!r}".encode())
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        data = fh.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data
    return data


@dataclass
class OwnHelper:
    base: Path
    socket_path: str
    policy_path: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        return self.log_path.read_text()

    def log_lines(self, event: str) -> list[str]:
        return [line for line in self.log().splitlines() if f"roboz_helper: {event} " in line]

    def write_policy(self, text: str) -> None:
        # As an editor does: a new file renamed over the old one.
        fresh = self.policy_path.with_suffix(".new")
        fresh.write_text(text)
        fresh.rename(self.policy_path)

    def reload(self, event: str = "policy_reloaded") -> str:
        """SIGHUP, then wait for the outcome's log line and return it."""
        before = len(self.log_lines(event))
        self.process.send_signal(signal.SIGHUP)
        wait_until(lambda: len(self.log_lines(event)) > before, what=f"log line {event}")
        return self.log_lines(event)[-1]

    def alive(self) -> bool:
        return self.process.poll() is None


@pytest.fixture
def own_helper(needs_root: None) -> Iterator[OwnHelper]:
    base, socket_path, policy = own_daemon_files("roboz-helper-own-")
    log_path = base / "helper.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            serve_command(policy, socket_path), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_for_socket(socket_path, proc=process)
        # The socket exists before the signal handlers are installed; "ready" (logged with
        # READY=1, which systemd waits for before it sends a reload) comes after them, so a
        # SIGHUP sent earlier would be ignored and the test would wait for a reload forever.
        wait_until(lambda: b"roboz-helper ready on" in log_path.read_bytes(), what="the ready line")
        yield OwnHelper(base, socket_path, policy, log_path, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def _helper_session(xprocess: object) -> Iterator[HelperDaemon]:
    base = make_base("roboz-helper-test-")
    build_tree(base)
    socket_path = str(base / "helper.sock")
    policy = base / "policy.toml"
    policy.write_text(policy_text(base, socket_path))

    try:
        with running_helper(xprocess, "roboz_helper", policy, socket_path) as log_path:
            yield HelperDaemon(
                socket_path=socket_path,
                base=base,
                workdir=base / "work",
                scripts_dir=base / "scripts",
                policy_path=policy,
                log_path=log_path,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def helper(needs_root: None, request: pytest.FixtureRequest) -> HelperDaemon:
    """The shared real daemon; requesting needs_root first makes it skip (or fail in CI)
    before the session daemon is started without root."""
    daemon: HelperDaemon = request.getfixturevalue("_helper_session")
    return daemon
