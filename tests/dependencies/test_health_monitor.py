"""The monitor caches the latest result and logs changes, not calls."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from roboz.dependencies import DependencyFailure, LLMEndpointDependency
from roboz.llm import MockLLMEndpoint
from roboz.shed.dependency_health import DependencyHealthMonitor, ExecutableDependency


class Switchable:
    """A dependency whose next result the test sets."""

    name = "switchable"

    def __init__(self) -> None:
        self.result: DependencyFailure | None = None

    def check(self) -> DependencyFailure | None:
        return self.result


def levels(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    seen = [(r.levelname, r.getMessage()) for r in caplog.records]
    caplog.clear()
    return seen


def test_changes_are_logged_at_their_level_and_repeats_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="roboz.shed.dependency_health")
    dependency = Switchable()
    monitor = DependencyHealthMonitor([dependency])
    assert monitor.records == {}

    monitor.check_all()
    assert levels(caplog) == [("DEBUG", "switchable ok")]

    down = DependencyFailure("helper_not_running", "no helper answers")
    dependency.result = down
    record = monitor.check("switchable")
    assert levels(caplog) == [
        ("WARNING", "switchable failing: [helper_not_running] no helper answers")
    ]
    assert monitor.records["switchable"] is record and record.failure == down and not record.ok

    monitor.check_all()
    assert levels(caplog) == [
        ("DEBUG", "switchable still failing: [helper_not_running] no helper answers")
    ]
    assert monitor.records["switchable"].since == record.since  # same state, same start

    dependency.result = DependencyFailure("helper_not_running", "stale socket")
    monitor.check_all()
    assert levels(caplog) == [("WARNING", "switchable failing: [helper_not_running] stale socket")]

    dependency.result = None
    monitor.check_all()
    assert levels(caplog) == [("INFO", "switchable recovered")]
    assert monitor.records["switchable"].ok


def test_different_dependencies_sharing_a_name_get_their_own_records() -> None:
    first, second = MockLLMEndpoint([]), MockLLMEndpoint([])
    monitor = DependencyHealthMonitor([LLMEndpointDependency(first)])
    assert monitor.add(LLMEndpointDependency(first)) == "LLM endpoint mock"  # the same one
    assert monitor.add(LLMEndpointDependency(second)) == "LLM endpoint mock #2"
    assert sorted(monitor.check_all()) == ["LLM endpoint mock", "LLM endpoint mock #2"]


def test_a_missing_executable_is_executable_missing(tmp_path: Path) -> None:
    present = tmp_path / "tool"
    present.write_text("#!/bin/sh\n")
    present.chmod(0o755)
    assert ExecutableDependency("tool", search_path=str(tmp_path)).check() is None
    failure = ExecutableDependency("rg", purpose="searching", search_path=str(tmp_path)).check()
    assert failure is not None
    assert failure.reason_code == "executable_missing"
    assert "rg is not installed" in failure.message and "searching" in failure.message
    not_executable = tmp_path / "gio"
    not_executable.write_text("")
    gio = ExecutableDependency("gio", search_path=str(tmp_path)).check()
    assert gio is not None and gio.reason_code == "executable_missing"


def test_bash_is_found_on_this_machine() -> None:
    # The real PATH: the Shed's executables are checked where tools will look for them.
    assert ExecutableDependency("bash").check() is None, os.environ.get("PATH")
