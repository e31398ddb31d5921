"""Public, typed policy loading in the core install: PermissionPolicy.from_file / from_toml,
the one parser of the file-policy format (roboz_helper.file_policy) that the helper uses too,
with errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from roboz_helper.file_policy import FilePolicyError, parse_file_policy

from roboz.shed.models import ActionVerdict, Operation
from roboz.shed.sandbox import PermissionPolicy
from tests.cli.helpers import run_cli


def _text(base: Path, extra: str = "") -> str:
    return f'base = "{base}"\ndefault = "deny"\n[[allow]]\npattern = "**"\n' + extra


def test_from_toml_and_from_file_give_the_same_decisions(tmp_path: Path) -> None:
    text = _text(tmp_path, '[[deny]]\npattern = "secrets/**"\noperations = ["read"]\n')
    path = tmp_path / "policy.toml"
    path.write_text(text)
    for policy in (PermissionPolicy.from_toml(text), PermissionPolicy.from_file(path)):
        assert policy.verdict("src/a.py", Operation.READ) is ActionVerdict.allow
        assert policy.verdict("secrets/k", Operation.READ) is ActionVerdict.deny
        assert policy.verdict("secrets/k", Operation.CREATE) is ActionVerdict.allow
        # The wire form is the same format, decoded by the same parser.
        assert policy.file_policy == parse_file_policy(text)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ('[[ask]]\npattern = "**a"\n', "ask[0].pattern: pattern '**a': '**' must be a whole"),
        ('[[deny]]\npattern = "a?"\n', "deny[0].pattern: rule pattern 'a?'"),
        ('[[deny]]\npattern = "x"\noperations = []\n', "deny[0].operations: name at least one"),
        ('[[deny]]\npattern = "x"\noperations = ["write"]\n', "deny[0].operations[0]"),
        ('[[deny]]\npatern = "x"\n', "deny[0]: Object contains unknown field `patern`"),
        ('precedence = "ask"\n', "precedence"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, extra: str, named: str) -> None:
    with pytest.raises(FilePolicyError) as caught:
        PermissionPolicy.from_toml(_text(tmp_path, extra), origin="p.toml")
    assert str(caught.value).startswith("p.toml: ") and named in str(caught.value)


def test_base_must_be_an_existing_absolute_directory(tmp_path: Path) -> None:
    with pytest.raises(FilePolicyError, match=r"base: must be an absolute path"):
        PermissionPolicy.from_toml('base = "rel"\n')
    with pytest.raises(FilePolicyError, match=r"base: .* is not an existing directory"):
        PermissionPolicy.from_toml(f'base = "{tmp_path}/none"\n')
    with pytest.raises(FilePolicyError, match=r"cannot read policy .*: No such file"):
        PermissionPolicy.from_file(tmp_path / "none.toml")


def test_mcp_check_policy_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(_text(tmp_path, '[[ask]]\npattern = "**a"\n'))
    result = run_cli("mcp", "check-policy", str(path), cwd=tmp_path)
    assert result.returncode == 2, result
    assert "ask[0].pattern" in result.stderr and "Traceback" not in result.stderr
    path.write_text(_text(tmp_path))
    ok = run_cli("mcp", "check-policy", str(path), cwd=tmp_path)
    assert ok.returncode == 0 and "allow: **" in ok.stdout, ok
