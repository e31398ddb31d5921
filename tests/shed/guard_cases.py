"""The guard battery's path cases as data, so that run_file_command and a sandboxed run are
held to the SAME decisions (tests/shed/test_guard_cases.py runs them through the guard,
tests/sandbox/test_guard_agreement.py inside a sandbox with the same policy).

The layout is fileutil.make_workspace's: base/notes (allowed), base/private (denied), outside/
next to base (denied; not bound in the sandbox at all). ``{base}`` and ``{outside}`` are
filled in; ``setup`` names host-side preparations (links) both sides get.

Each case is one operation in both forms: the guard's ``[value, tag]`` tokens and the shell
command a script would use for it. ``allowed`` is the decision both must reach: the guard runs
it (``ran``) or refuses it (``denied`` / ``failed``); the sandbox's command exits 0 or fails
without the secret's bytes coming out and without changing what the policy protects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from roboz.shed.models import Operation, PermissionRule
from tests.shed.fileutil import Workspace, make_workspace, snapshot


@dataclass(frozen=True)
class Case:
    name: str
    tokens: tuple[str, ...]
    shell: str
    allowed: bool
    setup: tuple[str, ...] = ()
    policy: str = "notes"  # which policy of POLICIES


# The policies the cases are decided under (make_workspace's arguments).
POLICIES = {
    # make_workspace's own: notes/** read, create, delete; everything else denied.
    "notes": {},
    # notes/ read-only but notes/sub/ writable, to check read-only against writable.
    "read_only": {
        "allow": (("notes/**", ("read",)), ("notes/sub/**", ("read", "create", "delete"))),
    },
}

CASES: tuple[Case, ...] = (
    Case("read allowed", ("cat:CMD", "notes/a.txt:PTH"), "cat notes/a.txt", True),
    Case("read denied", ("cat:CMD", "private/key.txt:PTH"), "cat private/key.txt", False),
    Case("read outside by ..", ("cat:CMD", "../outside/secret.txt:PTH"),
         "cat ../outside/secret.txt", False),
    Case("read denied by ..", ("cat:CMD", "notes/../private/key.txt:PTH"),
         "cat notes/../private/key.txt", False),
    Case("read denied, deep ..", ("cat:CMD", "notes/sub/../../private/key.txt:PTH"),
         "cat notes/sub/../../private/key.txt", False),
    Case("read outside absolute", ("cat:CMD", "{outside}/secret.txt:PTH"),
         "cat {outside}/secret.txt", False),
    Case("read denied absolute", ("cat:CMD", "{base}/private/key.txt:PTH"),
         "cat {base}/private/key.txt", False),
    Case("read via /proc/self/root", ("cat:CMD", "/proc/self/root{base}/private/key.txt:PTH"),
         "cat /proc/self/root{base}/private/key.txt", False),
    Case("list allowed", ("ls:CMD", "notes:PTH"), "ls notes", True),
    Case("list denied", ("ls:CMD", "private:PTH"), "ls private", False),
    Case("list the base", ("ls:CMD", ".:PTH"), "ls .", False),
    Case("grep -r allowed", ("grep:CMD", "-r:FLG", "beta:ARG", "notes:PTH"),
         "grep -r beta notes", True),
    Case("grep -r denied", ("grep:CMD", "-r:FLG", "SECRET:ARG", "private:PTH"),
         "grep -r SECRET private", False),
    Case("find denied", ("find:CMD", "private:PTH"), "find private", False),
    Case("create allowed", ("touch:CMD", "notes/new.txt:PTH"), "touch notes/new.txt", True),
    Case("create denied", ("touch:CMD", "private/t:PTH"), "touch private/t", False),
    Case("create in the base", ("touch:CMD", "top.txt:PTH"), "touch top.txt", False),
    Case("create outside", ("touch:CMD", "../outside/t:PTH"), "touch ../outside/t", False),
    Case("mkdir allowed", ("mkdir:CMD", "notes/d:PTH"), "mkdir notes/d", True),
    Case("mkdir denied", ("mkdir:CMD", "-p:FLG", "private/d/e:PTH"), "mkdir -p private/d/e",
         False),
    Case("write allowed", ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/o.txt:PTH"),
         "cat notes/a.txt | tee notes/o.txt", True),
    Case("write denied", ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD",
                          "private/key.txt:PTH"),
         "cat notes/a.txt | tee private/key.txt", False),
    Case("delete allowed", ("rm:CMD", "notes/a.txt:PTH"), "rm notes/a.txt", True),
    Case("delete denied", ("rm:CMD", "private/key.txt:PTH"), "rm private/key.txt", False),
    Case("rm -rf outside", ("rm:CMD", "-rf:FLG", "../outside:PTH"), "rm -r ../outside", False),  # -f would hide the refusal in the exit status
    Case("move a secret in", ("mv:CMD", "private/key.txt:PTH", "notes/stolen.txt:PTH"),
         "mv private/key.txt notes/stolen.txt", False),
    Case("copy a secret in", ("cp:CMD", "private/key.txt:PTH", "notes/stolen.txt:PTH"),
         "cp private/key.txt notes/stolen.txt", False),
    Case("copy allowed", ("cp:CMD", "notes/a.txt:PTH", "notes/copy.txt:PTH"),
         "cp notes/a.txt notes/copy.txt", True),
    Case("symlink to a denied dir", ("cat:CMD", "notes/sub/priv/key.txt:PTH"),
         "cat notes/sub/priv/key.txt", False, setup=("symlink ../../private notes/sub/priv",)),
    Case("symlink outside", ("cat:CMD", "notes/link.txt:PTH"), "cat notes/link.txt", False,
         setup=("symlink {outside}/secret.txt notes/link.txt",)),
    Case("symlink to a dir outside", ("ls:CMD", "notes/dirlink:PTH"), "ls notes/dirlink/",
         False, setup=("symlink {outside}/dir notes/dirlink",)),
    Case("read-only: read", ("cat:CMD", "notes/a.txt:PTH"), "cat notes/a.txt", True,
         policy="read_only"),
    Case("read-only: write", ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD",
                              "notes/a.txt:PTH"),
         "echo x > notes/a.txt", False, policy="read_only"),
    Case("read-only: create", ("touch:CMD", "notes/n.txt:PTH"), "touch notes/n.txt", False,
         policy="read_only"),
    Case("read-only: delete", ("rm:CMD", "notes/a.txt:PTH"), "rm notes/a.txt", False,
         policy="read_only"),
    Case("read-only: writable inside", ("touch:CMD", "notes/sub/n.txt:PTH"),
         "touch notes/sub/n.txt", True, policy="read_only"),
    Case("read-only: delete inside", ("rm:CMD", "notes/sub/b.md:PTH"), "rm notes/sub/b.md",
         True, policy="read_only"),
)  # fmt: skip


def workspace_for(tmp_path: Path, case: Case) -> Workspace:
    """make_workspace with the case's policy and set-up done on the host."""
    args: dict[str, object] = {}
    allow = POLICIES[case.policy].get("allow")
    if allow is not None:
        args["allow"] = tuple(
            PermissionRule(pattern=pattern, operations={Operation(op) for op in ops})
            for pattern, ops in allow
        )
    ws = make_workspace(tmp_path, **args)
    for step in case.setup:
        kind, target, link = fill(step, ws).split()
        assert kind == "symlink"
        os.symlink(target, ws.base / link)
    return ws


def fill(text: str, ws: Workspace) -> str:
    return text.replace("{base}", str(ws.base)).replace("{outside}", str(ws.outside))


def protected(ws: Workspace) -> dict[str, object]:
    """What no denied operation may change: everything outside notes/ (allowed) and the
    read-only part's files."""
    return {"outside": snapshot(ws.outside), "private": snapshot(ws.base / "private")}
