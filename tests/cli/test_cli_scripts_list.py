"""`roboz scripts list` says why the list may be empty, instead of printing nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from roboz.cli import scripts as scripts_cli


class _EmptyClient:
    def list_scripts(self) -> list[object]:
        return []


def test_empty_list_names_the_trust_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripts_cli, "_client", lambda socket: _EmptyClient())
    result = CliRunner().invoke(scripts_cli.app, ["list"])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "no scripts (the helper lists only trusted scripts" in result.stderr
    assert "roboz-helper check-policy" in result.stderr
