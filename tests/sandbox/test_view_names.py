"""File names that are not UTF-8 in a project narrowed by a file policy.

Linux names files with bytes. A denied file (or directory) whose name is not UTF-8, which
any run can create, made the plan unsendable (msgpack's str is UTF-8: "surrogates not
allowed"), so every later run under that policy failed with an internal error. The view
carries its paths as bytes now: such a file is masked like any other, and an allowed one
stays readable.
"""

from __future__ import annotations

import os

from roboz_helper.file_policy import FilePolicy, FileRule

from tests.sandbox.conftest import RUN_GID, RUN_UID, Sandbox

SECRET = "s3cr3t-not-utf8"


def test_names_that_are_not_utf8_are_masked_and_kept(sandbox: Sandbox) -> None:
    ws = sandbox.workspace
    raw = os.fsencode(ws)
    files = {
        b"/x\xfe.key": SECRET,  # denied by its name (**/*.key)
        b"/sec\xff/inner": SECRET + "-dir",  # inside a denied directory (sec*/**)
        b"/pub/\xff\xfe.txt": "public",  # allowed
    }
    for rel, text in files.items():
        os.makedirs(os.path.dirname(raw + rel), exist_ok=True)
        with open(raw + rel, "w") as fh:
            fh.write(text)
    for path in [ws, *ws.rglob("*")]:
        os.chown(path, RUN_UID, RUN_GID)
    policy = FilePolicy(
        base=str(ws),
        allow=(FileRule(pattern="**"),),
        deny=(FileRule(pattern="**/*.key"), FileRule(pattern="sec*/**")),
    )
    result = sandbox.exec(
        "/bin/sh", "-c", "cat ./*.key sec*/inner; grep -r s3cr3t .; cat pub/*",
        file_policies=(policy,),
    )  # fmt: skip
    assert result.outcome.status != "error" and "set-up" not in result.outcome.diagnostic, result
    assert SECRET not in result.out and SECRET not in result.err, result
    assert "public" in result.out, result
    for rel, text in files.items():
        with open(raw + rel) as fh:
            assert fh.read() == text
