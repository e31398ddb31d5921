"""run_file_command and a sandboxed run agree on every path case of the guard battery: each
case of tests/shed/guard_cases.py (which test_guard_cases.py holds the guard to) is done by a
shell command inside a real sandbox whose view is built from the same PermissionPolicy, and
must get the same decision, leak nothing and change nothing the policy protects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.sandbox.conftest import RUN_GID, RUN_UID, Sandbox
from tests.shed.fileutil import SECRET
from tests.shed.guard_cases import CASES, Case, fill, protected, workspace_for


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_sandbox_decides_each_case_like_the_guard(
    sandbox: Sandbox, tmp_path: Path, case: Case
) -> None:
    ws = workspace_for(tmp_path / "g", case)
    for path in [ws.base, *ws.base.rglob("*")]:
        os.lchown(path, RUN_UID, RUN_GID)  # the workdir must be writable by the run's user
    before = protected(ws)
    runner = Sandbox(ws.base, sandbox.scripts, warm=sandbox.warm)
    result = runner.exec(
        "/bin/sh", "-c", fill(case.shell, ws), file_policies=(ws.policy.file_policy,)
    )
    assert result.outcome.status in ("success", "failed"), result
    if case.allowed:
        assert result.outcome.exit_code == 0, (case, str(result))
    else:
        assert result.outcome.exit_code != 0, (case, str(result))
    assert SECRET not in result.stdout and SECRET not in result.stderr
    assert protected(ws) == before
