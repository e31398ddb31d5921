"""A run renames a directory on the way to a masked (or read-only) path, so that the next run,
narrowed by the same file policy, finds the protected files under a name no rule matches.

A mask is a mount point and cannot be renamed, but its parent could be: ``mv config c2``
carried ``config/secrets`` (denied by ``config/secrets/**``) to ``c2/secrets``, which the
rules do not name, and the next run read it (the guarded tools refuse that ``mv``: it would
reach denied paths below). Every directory between a bind and an entry of the view is a
mount point now, which rename(2) refuses.
"""

from __future__ import annotations

import os
from pathlib import Path

from roboz_helper.file_policy import FileMatcher, FilePolicy, FileRule
from roboz_helper.sandbox.view import MASK, READ_ONLY, SKELETON, SKELETON_CHILD, plan_view

from tests.sandbox.conftest import RUN_GID, RUN_UID, Sandbox

SECRET = "s3cr3t-renamed-away"
TREE = {
    "config/secrets/api.key": SECRET,  # denied by a directory rule two levels down
    "config/site.toml": "site",
    "app/.env": SECRET + "-env",  # denied by a rule naming the file itself
    "app/main.py": "main",
    "deep/a/b/token": SECRET + "-deep",  # a grandparent of the mask
    "docs/frozen/guide.md": "frozen",  # read-only: no create, no delete
    "keep/readme": "readme",
}
# renameat2(2) with RENAME_EXCHANGE swaps two names at once: the other way to move a parent.
EXCHANGE = (
    "python3 -c \"import ctypes, os; os.mkdir('empty'); "
    "r = ctypes.CDLL(None, use_errno=True).renameat2(-100, b'deep', -100, b'empty', 2); "
    "print('exchange', r, ctypes.get_errno())\""
)


def _policy(ws: Path) -> FilePolicy:
    return FilePolicy(
        base=str(ws),
        default="deny",
        allow=(FileRule(pattern="**"),),
        deny=(
            FileRule(pattern="config/secrets/**"),
            FileRule(pattern="app/.env"),
            FileRule(pattern="deep/a/b/**"),
            FileRule(pattern="docs/frozen/**", operations=("create", "delete")),
        ),
    )


def _make(ws: Path) -> None:
    for rel, text in TREE.items():
        path = ws / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path in [ws, *ws.rglob("*")]:
        os.chown(path, RUN_UID, RUN_GID)


def test_a_run_cannot_rename_what_leads_to_a_masked_path(sandbox: Sandbox) -> None:
    ws = sandbox.workspace
    _make(ws)
    policy = _policy(ws)
    moves = "; ".join(
        f"mv {a} {b}; echo {a}=$?"
        for a, b in (("config", "c2"), ("app", "a2"), ("deep", "d2"), ("deep/a", "a3"),
                     ("docs", "d4"), ("docs/frozen", "f5"))
    )  # fmt: skip
    first = sandbox.exec("/bin/sh", "-c", f"{moves}; {EXCHANGE}", file_policies=(policy,))
    assert first.outcome.status == "success", first
    for name in ("config", "app", "deep", "deep/a", "docs", "docs/frozen"):
        assert f"{name}=0" not in first.out, first
    assert "exchange -1 16" in first.out, first  # EBUSY
    # The next run, same policy, looks for the secrets wherever they could have gone.
    second = sandbox.exec(
        "/bin/sh",
        "-c",
        "grep -r s3cr3t . ; cat c2/secrets/api.key a2/.env d2/a/b/token a3/b/token "
        "empty/a/b/token; echo changed > d4/frozen/guide.md; echo changed > f5/guide.md",
        file_policies=(policy,),
    )
    assert SECRET not in second.out and SECRET not in second.err, second
    # Nothing on the host moved or changed; what the runs made (mv falls back to copying
    # across a mount: the readable part) holds no secret.
    for rel, text in TREE.items():
        assert (ws / rel).read_text() == text, rel
    for path in ws.rglob("*"):
        if path.is_file() and str(path.relative_to(ws)) not in TREE:
            assert SECRET not in path.read_text(), path


def test_the_plan_makes_every_directory_on_the_way_to_an_entry_a_mount(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _make(ws)
    entries = plan_view([FileMatcher(_policy(ws))], [(str(ws), True)], str(ws))
    paths = [os.fsdecode(e.path) for e in entries]
    mounted = set(paths)
    kinds = {path: e.kind for path, e in zip(paths, entries, strict=True)}
    assert kinds[f"{ws}/config/secrets"] == MASK
    assert kinds[f"{ws}/docs/frozen"] == READ_ONLY
    for path, entry in zip(paths, entries, strict=True):
        if entry.kind in (SKELETON, SKELETON_CHILD):
            continue
        parent = os.path.dirname(path)
        while parent != str(ws):
            assert parent in mounted, (path, parent)
            parent = os.path.dirname(parent)
    # Parents come before what is below them (pid 1 mounts in this order).
    for i, path in enumerate(paths):
        assert not any(path.startswith(later + "/") for later in paths[i + 1 :]), paths
    # Nothing where no entry is below: keep/ is not a mount.
    assert f"{ws}/keep" not in mounted
