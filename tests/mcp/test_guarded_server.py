"""`roboz mcp serve`, driven by the MCP SDK's own client: guarded tools for any MCP host.

Every refusal test checks the files outside the allowed area afterwards: refused means
nothing there was read back, written or deleted.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from roboz.cli.app import main
from roboz.mcp.policy_file import PolicyFileError, parse_policy_file
from roboz.mcp.serve import NO_ELICITATION

read_only: dict[str, bool] = {}  # what the last drive() saw in the tools' annotations
is_error: list[bool] = []  # each reply's isError in the last drive()
Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@pytest.fixture
def area(tmp_path: Path) -> dict[str, Path]:
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (work / "notes.md").write_text("hello\n")
    (work / "escape").symlink_to(outside / "secret.txt")
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'base = "{work}"\n'
        'default = "deny"\n'
        '[[allow]]\npattern = "**"\n'
        '[[ask]]\npattern = "**/*.lock"\noperations = ["create"]\n'
    )
    return {"work": work, "outside": outside, "policy": policy}


def serve(policy: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "roboz.cli", "mcp", "serve", "--policy", str(policy), *extra],
        env={**os.environ},
    )


def drive(
    params: StdioServerParameters,
    calls: list[tuple[str, dict[str, Any]]],
    elicit: Elicit | None = None,
) -> tuple[list[str], list[str]]:
    """Tool names the server lists, and the text of each call's reply."""
    read_only.clear()
    is_error.clear()

    async def go() -> tuple[list[str], list[str]]:
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as (read, write),
                ClientSession(read, write, elicitation_callback=elicit) as session,
            ):
                await session.initialize()
                listed = (await session.list_tools()).tools
                names = [tool.name for tool in listed]
                read_only.update(
                    {t.name: bool(t.annotations and t.annotations.readOnlyHint) for t in listed}
                )
                texts = []
                for name, arguments in calls:
                    result = await session.call_tool(name, arguments)
                    is_error.append(result.isError)
                    texts.append(" ".join(getattr(c, "text", "") for c in result.content))
                return names, texts

    return anyio.run(go)


def cmd(*tokens: tuple[str, str]) -> dict[str, Any]:
    return {"value": [list(token) for token in tokens]}


def test_denied_paths_are_refused_and_nothing_outside_changes(area: dict[str, Path]) -> None:
    secret = area["outside"] / "secret.txt"
    relative = "../outside/secret.txt"
    names, replies = drive(
        serve(area["policy"]),
        [
            ("run_file_command", cmd(("cat", "CMD"), (relative, "PTH"))),
            ("run_file_command", cmd(("cat", "CMD"), ("escape", "PTH"))),
            ("run_file_command", cmd(("rm", "CMD"), (str(secret), "PTH"))),
            ("run_file_command", cmd(("cp", "CMD"), ("notes.md", "PTH"), (relative, "PTH"))),
            (
                "apply_patch",
                {"path": relative, "old_string": "", "new_string": "overwritten"},
            ),
            ("process_pdf", {"path": relative}),
            ("run_file_command", cmd(("cat", "CMD"), ("notes.md", "PTH"))),
            ("apply_patch", {"path": "new.md", "old_string": "", "new_string": "made\n"}),
        ],
    )
    assert names == ["run_file_command", "apply_patch", "process_pdf"]
    assert read_only == {"run_file_command": False, "apply_patch": False, "process_pdf": True}
    for reply in replies[:6]:
        assert "denied" in reply.lower(), reply
        assert "TOP SECRET" not in reply
    assert secret.read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in area["outside"].iterdir()) == ["secret.txt"]
    assert is_error == [True] * 6 + [False] * 2, replies
    assert "hello" in replies[6]
    assert (area["work"] / "new.md").read_text() == "made\n"


def _answer(approve: bool) -> Elicit:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert "yarn.lock" in params.message
        return types.ElicitResult(action="accept", content={"approve": approve})

    return elicit


@pytest.mark.parametrize("approve", [True, False])
def test_ask_uses_elicitation(area: dict[str, Path], approve: bool) -> None:
    lock = area["work"] / "yarn.lock"
    _, [reply] = drive(
        serve(area["policy"]),
        [("run_file_command", cmd(("touch", "CMD"), ("yarn.lock", "PTH")))],
        elicit=_answer(approve),
    )
    assert lock.exists() is approve
    assert NO_ELICITATION not in reply
    assert is_error == [not approve]


@pytest.mark.parametrize("content", [{}, {"approve": "maybe"}, None])
def test_an_invalid_approval_answer_is_a_clear_refusal(
    area: dict[str, Path], content: dict[str, Any] | None
) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=content)

    lock = area["work"] / "yarn.lock"
    _, [reply] = drive(
        serve(area["policy"]),
        [("run_file_command", cmd(("touch", "CMD"), ("yarn.lock", "PTH")))],
        elicit=elicit,
    )
    assert not lock.exists()
    assert is_error == [True]
    assert "DENIED" in reply and "internal error" not in reply
    assert "answer to the approval request was not" in reply, reply


def test_ask_without_elicitation_is_refused_and_says_why(area: dict[str, Path]) -> None:
    _, [reply] = drive(
        serve(area["policy"]),
        [("apply_patch", {"path": "yarn.lock", "old_string": "", "new_string": "x"})],
    )
    assert not (area["work"] / "yarn.lock").exists()
    assert "DENIED" in reply and NO_ELICITATION in reply


def test_run_shell_script_is_offered_with_a_socket(area: dict[str, Path], tmp_path: Path) -> None:
    path = str(tmp_path / "helper.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)  # bound but never accepting: the helper "is down"
    try:
        names, [reply] = drive(serve(area["policy"], "--socket", path), [("run_shell_script", {})])
    finally:
        listener.close()
    assert names[-1] == "run_shell_script"
    assert "helper error" in reply


def test_policy_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match=r"allow\[0\]\.operations\[0\]: Invalid enum"):
        parse_policy_file(f'base = "{tmp_path}"\n[[allow]]\npattern = "**"\noperations = ["x"]')
    with pytest.raises(PolicyFileError, match="unknown field `bases`"):
        parse_policy_file(f'bases = "{tmp_path}"')
    with pytest.raises(PolicyFileError, match="base: must be an absolute path"):
        parse_policy_file('base = "relative"')
    with pytest.raises(PolicyFileError, match=r"deny\[0\]\.pattern: .*'\?' and brackets"):
        parse_policy_file(f'base = "{tmp_path}"\n[[deny]]\npattern = "a?"')
    with pytest.raises(PolicyFileError, match="invalid TOML"):
        parse_policy_file("base = ")


def test_serve_with_a_bad_policy_exits_2_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('base = "/nonexistent/dir"\n')
    assert main(["mcp", "serve", "--policy", str(policy)]) == 2
    assert "base: /nonexistent/dir is not an existing directory" in capsys.readouterr().err


def test_serve_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "roboz.cli", "mcp", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "--policy" in done.stdout and "--socket" in done.stdout


def test_without_the_sdk_the_hint_is_printed_once_and_installs_from_the_clone(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f'base = "{tmp_path}"\n')
    blocked = "import sys; sys.modules['mcp'] = None; from roboz.cli.app import main; "
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            # check-policy needs no SDK (the loader is in the core install); serve does.
            blocked + f"sys.exit(main(['mcp', 'serve', '--policy', {str(policy)!r}]))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("roboz: error: roboz.mcp needs the MCP SDK")
    assert line.count("install") == 1 and "pip install -e '.[mcp]'" in line
    assert "pip install 'roboz[mcp]'" not in line


def test_a_helper_policy_given_to_this_checker_names_the_right_checker(tmp_path: Path) -> None:
    helper_policy = Path(__file__).resolve().parents[2] / "policies" / "strict.toml"
    result = subprocess.run(
        [sys.executable, "-m", "roboz.cli", "mcp", "check-policy", str(helper_policy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "this is a helper policy" in line and "roboz-helper check-policy" in line
