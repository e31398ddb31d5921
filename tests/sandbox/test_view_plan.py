"""view.plan_view against a brute force: over every path of a tree, a path whose read the
policy denies is masked (or lies under a mask), and nothing readable is; a path that may not
be written sits in a read-only part. The planner prunes (it looks only where a rule can
decide differently, and looks up literally named children instead of listing), so this is
the check that pruning never skips a match. Pure planning: no sandbox, no root."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from roboz_helper.file_policy import FileMatcher, FilePolicy, FileRule, composed_verdict
from roboz_helper.sandbox.view import (
    MASK,
    READ_ONLY,
    SKELETON,
    SKELETON_CHILD,
    WRITABLE,
    plan_view,
)

TREE = (
    "secrets/api.key", "secrets/deep/x.key", "src/a.py", "src/.env", "src/sub/.env",
    "src/sub/b.py", "config/site.key", "config/site.toml", "docs/guide.md", "docs/old/x.md",
    "data/private/p.csv", "data/public/q.csv", ".env", "README",
)  # fmt: skip
RULE_SETS = {
    "anchored": ("secrets/**", "config/*.key", "data/private/**"),
    "by name": ("**/.env", "**/*.key"),
    "mixed": ("secrets/**", "**/.env", "docs/old/**", "src/sub/*.py"),
    "single files": ("README", "src/a.py"),
}
READ_ONLY_SETS = {"none": (), "docs": ("docs/**",), "by name": ("**/*.md",)}


def _build(root: Path) -> None:
    for rel in TREE:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)


def _all_paths(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        found += [os.path.join(dirpath, name) for name in dirnames + filenames]
    return sorted(found)


def _under(path: str, tops: set[str]) -> bool:
    return any(path == top or path.startswith(top + "/") for top in tops)


@pytest.mark.parametrize(("rules", "read_only"), list(itertools.product(RULE_SETS, READ_ONLY_SETS)))
def test_the_plan_masks_exactly_what_the_policy_denies(
    tmp_path: Path, rules: str, read_only: str
) -> None:
    root = tmp_path / "ws"
    _build(root)
    policy = FilePolicy(
        base=str(root),
        default="deny",
        allow=(FileRule(pattern="**"),),
        deny=tuple(FileRule(pattern=p) for p in RULE_SETS[rules])
        + tuple(
            FileRule(pattern=p, operations=("create", "delete")) for p in READ_ONLY_SETS[read_only]
        ),
    )
    matchers = [FileMatcher(policy)]
    entries = plan_view(matchers, [(str(root), True)], str(root))
    masks = {os.fsdecode(e.path) for e in entries if e.kind == MASK}
    skeletons = {os.fsdecode(e.path) for e in entries if e.kind == SKELETON}
    kept = {os.fsdecode(e.path) for e in entries if e.kind == SKELETON_CHILD}

    def hidden(path: str) -> bool:
        if _under(path, masks):
            return True
        return (
            any(
                _under(path, {top})
                and path != top
                and not _under(path, {k for k in kept if k.startswith(top + "/")})
                for top in skeletons
            )
            or path in skeletons
        )

    for path in _all_paths(root):
        denied = composed_verdict(matchers, path, "read") != "allow"
        # Denied: hidden. Allowed: visible, unless below a denied directory (which hides all).
        assert hidden(path) == denied or (not denied and hidden(os.path.dirname(path))), path
    # Writability: follow the entries in order as the mounts would stack.
    modes = sorted(((os.fsdecode(e.path), e.kind) for e in entries if e.kind in (READ_ONLY, WRITABLE)),
                   key=lambda item: item[0].count("/"))  # fmt: skip

    def writable(path: str) -> bool:
        mode = True
        for top, kind in modes:
            if path == top or path.startswith(top + "/"):
                mode = kind == WRITABLE
        return mode

    for path in _all_paths(root):
        if hidden(path):
            continue
        may_write = all(
            composed_verdict(matchers, path, op) == "allow" for op in ("create", "delete")
        )
        if not may_write:
            assert not writable(path), path
