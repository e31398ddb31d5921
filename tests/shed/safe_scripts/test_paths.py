"""Every Shed API that takes a path takes a str or an os.PathLike (pathlib.Path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboz.shed.capabilities import SafeScripts
from roboz.shed.dependency_health import HelperSocketDependency
from roboz.shed.models import Operation, PermissionRule
from roboz.shed.patch import apply_patch
from roboz.shed.pdf import read_pdf
from roboz.shed.safe_scripts import HelperUnavailable, SafeScriptsClient
from roboz.shed.safe_scripts.tool import get_run_shell_script
from roboz.shed.sandbox import PermissionPolicy
from tests.shed.safe_scripts.conftest import Helper
from tests.shed.test_pdf import pdf_bytes


def test_the_client_takes_a_path_to_a_real_helper(helper: Helper) -> None:
    client = SafeScriptsClient(Path(helper.socket_path))
    assert client.socket_path == helper.socket_path
    assert client.check().profile == "agent"
    assert client.run_script("greet.sh", ["you"]).stdout == "hello you\n"
    assert HelperSocketDependency(Path(helper.socket_path)).check() is None


def test_a_missing_socket_given_as_a_path_is_unavailable_not_a_type_error(tmp_path: Path) -> None:
    absent = tmp_path / "absent.sock"
    with pytest.raises(HelperUnavailable, match=f"no helper socket at {absent}"):
        SafeScriptsClient(absent).check()
    failure = HelperSocketDependency(absent).check()
    assert failure is not None and failure.reason_code == "helper_socket_missing"
    assert HelperSocketDependency(absent) == HelperSocketDependency(str(absent))
    assert SafeScripts(socket_path=absent).socket_path == str(absent)
    assert get_run_shell_script(absent) is not None


def test_policy_patch_and_pdf_take_paths(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("alpha\n")
    (tmp_path / "notes" / "r.pdf").write_bytes(pdf_bytes(["page one"]))
    rule = PermissionRule(pattern="notes/**", operations={Operation.READ, Operation.CREATE})
    for base in (tmp_path, str(tmp_path)):
        policy = PermissionPolicy(base=base, allow=(rule,))
        assert policy.base == tmp_path.resolve()
    policy = PermissionPolicy(base=tmp_path, allow=(rule,))
    outcome = apply_patch(policy, Path("notes/a.txt"), "alpha", "beta")
    assert outcome.replacements == 1
    assert (tmp_path / "notes" / "a.txt").read_text() == "beta\n"
    assert "page one" in read_pdf(policy, Path("notes/r.pdf")).text
