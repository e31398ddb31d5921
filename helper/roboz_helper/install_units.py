"""`roboz-helper install-units`: put the systemd units, the sysusers/tmpfiles snippets and an
example policy where systemd looks for them, with ExecStart naming this very installation.

The files ship inside the package (system_files/; the repository's systemd/ and
policies/strict.toml point at the same files). The service's ExecStart is rewritten to the
`roboz-helper` next to the running interpreter, so the unit starts exactly the environment
the command was run from. Nothing is overwritten without --force, and an existing policy is
never replaced: it is the operator's.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DEFAULT_POLICY = "/etc/roboz-helper/policy.toml"
_SHIPPED_EXEC_START = "ExecStart=/opt/roboz/venv/bin/roboz-helper serve --policy " + DEFAULT_POLICY
# systemd splits ExecStart on whitespace and expands % and $; such a path would need escaping,
# and a path that needs escaping is one nobody should have to audit in a root service.
_UNIT_SAFE_PATH = re.compile(r"/[A-Za-z0-9_@+,./-]*")


class InstallError(Exception):
    """Nothing was written (or not everything): the message says why."""


@dataclass(frozen=True)
class PlannedFile:
    target: Path
    content: str
    replaceable: bool  # units and snippets: with --force; the policy: never


def _shipped(name: str) -> str:
    return (resources.files("roboz_helper") / "system_files" / name).read_text()


def helper_command() -> str:
    """The absolute `roboz-helper` command of the running environment."""
    script = Path(os.path.abspath(sys.executable)).parent / "roboz-helper"
    command = str(script) if os.access(script, os.X_OK) else f"{sys.executable} -m roboz_helper"
    for part in command.split(" "):
        if part != "-m" and part != "roboz_helper" and not _UNIT_SAFE_PATH.fullmatch(part):
            raise InstallError(
                f"{part!r} cannot be written into a unit as it is (use a path made of letters, "
                "digits and ._-+,@ only, for example a virtual environment in /opt/roboz/venv)"
            )
    return command


def _service(command: str, policy: str) -> str:
    text = _shipped("roboz-helper.service")
    if text.count(_SHIPPED_EXEC_START + "\n") != 1:
        raise InstallError("the shipped service has no ExecStart line to rewrite")
    return text.replace(_SHIPPED_EXEC_START, f"ExecStart={command} serve --policy {policy}")


def plan(prefix: Path, policy: str, command: str) -> list[PlannedFile]:
    if not policy.startswith("/") or not _UNIT_SAFE_PATH.fullmatch(policy):
        raise InstallError(f"--policy must be an absolute path of plain characters: {policy!r}")

    def under(path: str) -> Path:
        return prefix / path.lstrip("/")

    return [
        PlannedFile(
            under("/etc/systemd/system/roboz-helper.socket"),
            _shipped("roboz-helper.socket"),
            replaceable=True,
        ),
        PlannedFile(
            under("/etc/systemd/system/roboz-helper.service"),
            _service(command, policy),
            replaceable=True,
        ),
        PlannedFile(
            under("/etc/sysusers.d/roboz-helper.conf"),
            _shipped("roboz-helper.sysusers.conf"),
            replaceable=True,
        ),
        PlannedFile(
            under("/etc/tmpfiles.d/roboz-helper.conf"),
            _shipped("roboz-helper.tmpfiles.conf"),
            replaceable=True,
        ),
        PlannedFile(under(policy), _shipped("strict.toml"), replaceable=False),
    ]


def _write(target: Path, content: str) -> None:
    """Atomically, 0644: a half-written unit must never be what systemd reads."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise


def install(files: list[PlannedFile], force: bool, say: Callable[[str], None]) -> None:
    """Write the planned files; refuse before writing anything if one would be replaced."""
    blocked = [
        f.target
        for f in files
        if f.target.exists() and f.replaceable and not force and f.target.read_text() != f.content
    ]
    if blocked:
        names = ", ".join(str(p) for p in blocked)
        raise InstallError(f"would overwrite {names}; nothing written (use --force to replace)")
    for f in files:
        if f.target.exists() and not f.replaceable:
            say(f"kept      {f.target} (an existing policy is never replaced)")
        elif f.target.exists() and f.target.read_text() == f.content:
            say(f"unchanged {f.target}")
        else:
            _write(f.target, f.content)
            say(f"wrote     {f.target}")


def untrusted_environment(command: str) -> str | None:
    """A root service runs this code: whoever can change it, or where it lives, is root.
    (A first line of defence, not an audit: site-packages is not walked.)"""
    program = Path(command.split(" ")[0])
    for path in (program, program.parent, Path(sys.prefix)):
        info = os.stat(path)
        if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{path} can be changed by someone other than root; the service runs it as root"
    return None


def apply(files: list[PlannedFile], say: Callable[[str], None]) -> None:
    """Create the users and directories now, and tell systemd about the new units."""
    commands = [
        ["systemd-sysusers", str(files[2].target)],
        ["systemd-tmpfiles", "--create", str(files[3].target)],
    ]
    if os.path.isdir("/run/systemd/system"):  # systemd is the running service manager
        commands.append(["systemctl", "daemon-reload"])
    for argv in commands:
        if shutil.which(argv[0]) is None:
            say(f"skipped   {' '.join(argv)} ({argv[0]} is not installed)")
            continue
        say(f"running   {' '.join(argv)}")
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise InstallError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
