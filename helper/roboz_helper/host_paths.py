"""A policy against the host it runs on: do its paths exist and obey the helper's rules?

policy.py checks what a file says; this module checks what the host has. The same rules run
in `roboz-helper check-policy`, at start-up and on every reload (a policy whose paths are wrong
is refused), and before every run, so that a directory removed later is a refusal that names
it rather than a failure deep inside the sandbox.

The rules are the ones the helper enforces when it uses a path:

- scripts_dir: an existing directory that only root (or the helper's own user, when it runs
  rootless) can change; scripts below it obey the same rule (see scripts.untrusted_reason).
- workdir: an existing directory; workdir, readonly_paths and writable_paths must name
  themselves: no symlink anywhere in them (the sandbox refuses to bind through one).
- commands: existing executable files (the sandbox resolves them in its own view of the system,
  where /bin may be a symlink to /usr/bin, so symlinks are allowed here).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from roboz_helper.policy import Policy, PolicyError, Profile, load_file_policies, load_policy
from roboz_helper.scripts import untrusted_reason


class PolicyPathsError(PolicyError):
    """The policy file is valid, but the host does not provide what its paths name."""

    def __init__(self, problems: list[PathProblem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class PathProblem:
    field: str  # e.g. profiles.ci.workdir
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.path}: {self.problem}"


def _stat(path: str) -> os.stat_result | str:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return "does not exist"
    except NotADirectoryError:
        return "does not exist (a component of the path is not a directory)"
    except OSError as exc:
        return f"cannot be examined: {exc.strerror}"


def _symlink_free(path: str) -> str | None:
    real = os.path.realpath(path)
    if real != os.path.normpath(path):
        return f"goes through a symlink (resolves to {real}); policy paths must be symlink-free"
    return None


def _directory(path: str, trusted: bool = False) -> str | None:
    info = _stat(path)
    if isinstance(info, str):
        return info
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    return untrusted_reason(info) if trusted else None


def _scripts_dir(path: str) -> str | None:
    return _directory(path, trusted=True)


def _bindable(path: str) -> str | None:
    info = _stat(path)
    if isinstance(info, str):
        return info
    return _symlink_free(path)


def _workdir(path: str) -> str | None:
    return _directory(path) or _symlink_free(path)


def _command(path: str) -> str | None:
    info = _stat(path)
    if isinstance(info, str):
        return info
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if not info.st_mode & 0o111:
        return "is not executable"
    return None


def _problems(where: str, checks: Iterable[tuple[str, str, str | None]]) -> list[PathProblem]:
    return [
        PathProblem(f"{where}.{field}", path, problem)
        for field, path, problem in checks
        if problem is not None
    ]


def run_problems(name: str, profile: Profile) -> list[PathProblem]:
    """What stops any run of this profile: its scripts directory, workdir and binds."""
    where = f"profiles.{name}"
    checks = [
        ("scripts_dir", profile.scripts_dir, _scripts_dir(profile.scripts_dir)),
        ("workdir", profile.workdir, _workdir(profile.workdir)),
    ]
    for field in ("readonly_paths", "writable_paths"):
        for i, path in enumerate(getattr(profile, field)):
            checks.append((f"{field}[{i}]", path, _bindable(path)))
    return _problems(where, checks)


def listing_problems(name: str, profile: Profile) -> list[PathProblem]:
    """What stops listing this profile's scripts."""
    problem = _scripts_dir(profile.scripts_dir)
    return _problems(f"profiles.{name}", [("scripts_dir", profile.scripts_dir, problem)])


def _profile_problems(name: str, profile: Profile) -> list[PathProblem]:
    """Every path of a profile, commands included."""
    commands = [(f"commands[{i}]", path, _command(path)) for i, path in enumerate(profile.commands)]
    return run_problems(name, profile) + _problems(f"profiles.{name}", commands)


def policy_problems(policy: Policy) -> list[PathProblem]:
    return [
        problem
        for name, profile in policy.profiles.items()
        for problem in _profile_problems(name, profile)
    ]


def load_usable_policy(path: str | os.PathLike[str]) -> Policy:
    """load_policy, then the host checks: what serve, a reload and check-policy accept."""
    policy = load_policy(path)
    problems = policy_problems(policy)
    if problems:
        raise PolicyPathsError(problems)
    return load_file_policies(policy)
