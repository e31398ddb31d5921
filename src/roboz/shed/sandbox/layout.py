"""Sandbox: the filesystem layout an orchestrator and its Librarian work in.

A root holds named areas: read-only areas, shared areas (writes ask the user first), the
projects directory and the state directory, where each project's runs, snapshots and memory
live. Areas never overlap; one project is in scope at a time. Describing a layout touches
nothing on disk: :meth:`Sandbox.prepare` makes the scoped project's directories when asked.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from roboz.shed.guard._policy import PermissionPolicy
from roboz.shed.models import ActionVerdict, Operation, PermissionRule

WRITES = frozenset({Operation.CREATE, Operation.DELETE})


class SandboxError(ValueError):
    """A layout that cannot work (overlapping areas, an area outside the root, no project)."""


def _area(root: str, kind: str, value: str | os.PathLike[str]) -> tuple[str, str]:
    text = os.fspath(value)
    if not text or "\x00" in text:
        raise SandboxError(f"{kind} area {text!r} is not a path")
    absolute = posixpath.normpath(text if text.startswith("/") else posixpath.join(root, text))
    if absolute == root or not absolute.startswith(root.rstrip("/") + "/"):
        raise SandboxError(f"{kind} area {text!r} must be a directory inside the root {root}")
    return kind, absolute


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


@dataclass(frozen=True)
class Sandbox:
    """``root`` with its areas (relative to ``root`` or absolute inside it) and the project in
    scope. ``scoped(name)`` gives the same layout scoped to another project."""

    root: Path
    read_only: Sequence[str | os.PathLike[str]] = ()
    shared: Sequence[str | os.PathLike[str]] = ()
    projects: str | os.PathLike[str] = "projects"
    state: str | os.PathLike[str] = ".roboz"
    project: str | None = None
    _areas: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        root = os.path.realpath(os.fspath(self.root))  # the guard compares physical paths
        object.__setattr__(self, "root", Path(root))
        object.__setattr__(self, "read_only", tuple(self.read_only))
        object.__setattr__(self, "shared", tuple(self.shared))
        areas = [_area(root, "read-only", value) for value in self.read_only]
        areas += [_area(root, "shared", value) for value in self.shared]
        areas.append(_area(root, "projects", self.projects))
        areas.append(_area(root, "state", self.state))
        for index, (kind, path) in enumerate(areas):
            for other_kind, other in areas[index + 1 :]:
                if _overlap(path, other):
                    raise SandboxError(
                        f"sandbox areas overlap: {kind} area {path} and {other_kind} area "
                        f"{other}; give each area its own directory"
                    )
        object.__setattr__(self, "_areas", tuple(areas))
        if self.project is not None:
            name = self.project
            if not name or name in (".", "..") or "/" in name or "\x00" in name:
                raise SandboxError(f"project name {name!r} must be one directory name")

    def scoped(self, project: str) -> Sandbox:
        """This layout with ``project`` in scope (the only project its agents may change)."""
        return replace(self, project=project)

    def _path(self, kind: str) -> Path:
        return Path(next(path for k, path in self._areas if k == kind))

    def _scope(self) -> str:
        if self.project is None:
            raise SandboxError(
                f"the sandbox at {self.root} has no project in scope; use sandbox.scoped(name)"
            )
        return self.project

    @property
    def project_dir(self) -> Path:
        """Where the scoped project's files live (agents create and delete here)."""
        return self._path("projects") / self._scope()

    @property
    def state_dir(self) -> Path:
        """The scoped project's runs, snapshots and memory: only the Librarian writes here."""
        return self._path("state") / self._scope()

    @property
    def run_store(self) -> Path:
        """The SQLite thread store holding the project's runs and the Librarian's ledger."""
        return self.state_dir / "runs.db"

    @property
    def snapshots_dir(self) -> Path:
        return self.state_dir / "snapshots"

    @property
    def memory_dir(self) -> Path:
        return self.state_dir / "memory"

    def prepare(self) -> Sandbox:
        """Make the scoped project's directories (the layout itself never does)."""
        for directory in (self.project_dir, self.snapshots_dir, self.memory_dir):
            directory.mkdir(parents=True, exist_ok=True)
        return self

    def permissions(self) -> PermissionPolicy:
        """The agents' file tools' policy: read anywhere in the sandbox, create and delete in
        the scoped project, ask before writing to shared areas, deny everything else; the
        state area (memory and the run store) is always denied, reads included."""
        project = self.project_dir
        shared = [path for kind, path in self._areas if kind == "shared"]
        return PermissionPolicy(
            base=project,
            default_verdict=ActionVerdict.deny,
            allow=(
                PermissionRule(pattern=f"{self.root}/**", operations=frozenset({Operation.READ})),
                PermissionRule(pattern=f"{project}/**", operations=WRITES),
            ),
            ask=tuple(PermissionRule(pattern=f"{path}/**", operations=WRITES) for path in shared),
            deny=(PermissionRule(pattern=f"{self._path('state')}/**"),),
        )
