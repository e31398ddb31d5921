"""The guard battery's path cases (guard_cases.py) through run_file_command: the decisions
the sandbox must reach too (tests/sandbox/test_guard_agreement.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.shed.fileutil import SECRET
from tests.shed.guard_cases import CASES, Case, fill, protected, workspace_for


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_guard_decides_each_case(tmp_path: Path, case: Case) -> None:
    ws = workspace_for(tmp_path, case)
    before = protected(ws)
    result = ws.run(*(fill(token, ws) for token in case.tokens))
    states = [command.state for command in result.commands]
    if case.allowed:
        assert all(state == "ran" for state in states), (case, result.value)
    else:
        assert states[-1] in ("denied", "failed"), (case, result.value)
    assert SECRET.decode() not in result.value
    assert protected(ws) == before
