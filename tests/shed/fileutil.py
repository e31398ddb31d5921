"""Helpers for the guarded-files tests: workspaces, token building, tree snapshots."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from roboz.models import Str
from roboz.shed.files import FileCommandEngine, FileCommandResult, Limits, Tag
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy

SECRET = b"TOP-SECRET-OUTSIDE-BYTES"


def toks(*items: str) -> list[tuple[str, Tag]]:
    """``"cat:CMD", "notes/a.txt:PTH"`` -> pairs; the tag is after the last colon."""
    pairs = []
    for item in items:
        value, tag = item.rsplit(":", 1)
        pairs.append((value, Tag(tag)))
    return pairs


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry below ``root`` (and root itself): kind and content hash or link target."""
    result: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames, ""]:
            path = Path(dirpath, name) if name else Path(dirpath)
            rel = str(path.relative_to(root))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                result[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                result[rel] = ("dir", "")
            elif stat.S_ISREG(st.st_mode):
                result[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                result[rel] = ("special", oct(st.st_mode))
    return result


@dataclass
class Workspace:
    root: Path
    base: Path
    outside: Path
    policy: PermissionPolicy

    def run(self, *items: str, limits: Limits | None = None, hook=None) -> FileCommandResult:
        engine = FileCommandEngine(self.policy, limits=limits, on_checked=hook)
        return engine.run(toks(*items))

    def outside_snapshot(self) -> dict[str, tuple[str, str]]:
        return snapshot(self.outside)


def make_workspace(tmp_path: Path, **policy_args: object) -> Workspace:
    """base/ with notes/ (allowed), private/ (denied) and outside/ next to base."""
    root = tmp_path
    base = root / "base"
    outside = root / "outside"
    (base / "notes" / "sub").mkdir(parents=True)
    (base / "private").mkdir()
    outside.mkdir()
    (base / "notes" / "a.txt").write_bytes(b"alpha line\nbeta line\n")
    (base / "notes" / "sub" / "b.md").write_bytes(b"# title\nbeta\n")
    (base / "private" / "key.txt").write_bytes(SECRET)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "dir").mkdir()
    (outside / "dir" / "inner.txt").write_bytes(SECRET)
    args: dict[str, object] = {
        "base": base,
        "default_verdict": ActionVerdict.deny,
        "allow": (
            PermissionRule(
                pattern="notes/**",
                operations={Operation.READ, Operation.CREATE, Operation.DELETE},
            ),
        ),
    }
    args.update(policy_args)
    return Workspace(root, base, outside, PermissionPolicy(**args))  # type: ignore[arg-type]


class ScriptedIO:
    """A UserIO that answers prompts from a list and records them."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | None:
        self.prompts.append(prompt)
        return Str(value=self.answers.pop(0)) if self.answers else None

    def notify(self, message: str) -> None:
        self.prompts.append(message)
