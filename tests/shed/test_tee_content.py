"""tee with inline content: the shell-less ``echo text > file`` of run_file_command."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.runtime.io import use_user_io
from roboz.shed.files import FileCommandInput
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.skills import FilesystemContext, filesystem_instructions, filesystem_skill
from roboz.tools import stop

from .fileutil import ScriptedIO, make_workspace, snapshot
from .test_skills_e2e import tool_results

# The seed's "creates a note and counts its lines", exactly as the LLM writes it.
SEED_EXAMPLE = [
    ["mkdir", "CMD"],
    ["-p", "FLG"],
    ["notes", "PTH"],
    ["&&", "CTL"],
    ["tee", "CMD"],
    ["line 1\nline 2\n", "ARG"],
    ["notes/today.txt", "PTH"],
    ["&&", "CTL"],
    ["wc", "CMD"],
    ["-l", "FLG"],
    ["notes/today.txt", "PTH"],
]


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)


def test_the_seed_example_creates_the_note_and_counts_two_lines(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    policy = PermissionPolicy(
        base=base,
        default_verdict=ActionVerdict.deny,
        allow=(
            PermissionRule(
                pattern="notes/**", operations={Operation.READ, Operation.CREATE, Operation.DELETE}
            ),
        ),
    )
    endpoint = MockLLMEndpoint(
        [
            {"action": "run_file_command", "rationale": "write a note", "value": SEED_EXAMPLE},
            {"action": "stop", "value": "done"},
        ]
    )
    agent = Agent(
        name="notes",
        agent_endpoint=endpoint,
        tools=[stop],
        auto_loaded_skills=[filesystem_skill(FilesystemContext(permissions=policy))],
    )
    _, messages = agent.invoke()
    assert (base / "notes/today.txt").read_bytes() == b"line 1\nline 2\n"
    [report] = tool_results(messages, "execute_file_command")
    assert "3 ran; exit status 0" in report
    assert "2 notes/today.txt" in report


@pytest.mark.parametrize(
    "content",
    [b"no newline at the end", b"crlf\r\nkept\r\n", b"\n\n", "unicod\u00e9 \u2713\n".encode()],
)
def test_content_is_written_byte_exactly(ws, content):
    result = ws.run("tee:CMD", f"{content.decode()}:ARG", "notes/n.txt:PTH")
    assert result.exit_status == 0
    assert (ws.base / "notes/n.txt").read_bytes() == content
    assert result.commands[0].stdout == content.decode()


def test_content_goes_to_every_destination_and_append_appends(ws):
    assert ws.run("tee:CMD", "x\n:ARG", "notes/1:PTH", "notes/2:PTH").exit_status == 0
    assert (ws.base / "notes/1").read_bytes() == (ws.base / "notes/2").read_bytes() == b"x\n"
    assert ws.run("tee:CMD", "-a:FLG", "y\n:ARG", "notes/1:PTH").exit_status == 0
    assert (ws.base / "notes/1").read_bytes() == b"x\ny\n"


def test_a_content_arg_that_looks_like_an_option_is_content(ws):
    assert ws.run("tee:CMD", "-a:ARG", "notes/dash.txt:PTH").exit_status == 0
    assert (ws.base / "notes/dash.txt").read_bytes() == b"-a"


def test_with_a_pipe_stdin_wins_and_an_arg_is_an_error(ws):
    before = snapshot(ws.base)
    result = ws.run("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "x:ARG", "notes/p.txt:PTH")
    assert result.commands[1].state == "failed"
    assert "from the pipe" in result.commands[1].reason
    assert result.exit_status != 0
    assert snapshot(ws.base) == before
    # without the ARG the pipe is written
    ok = ws.run("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/p.txt:PTH")
    assert (ws.base / "notes/p.txt").read_bytes() == (ws.base / "notes/a.txt").read_bytes()
    assert ok.exit_status == 0


@pytest.mark.parametrize(
    "items",
    [
        ("tee:CMD", "one:ARG", "two:ARG", "notes/t.txt:PTH"),
        ("tee:CMD", "notes/t.txt:PTH", "late:ARG"),
        ("tee:CMD", "notes/t.txt:PTH", "late:ARG", "notes/u.txt:PTH"),
    ],
)
def test_exactly_one_content_arg_before_the_destinations(ws, items):
    before = snapshot(ws.base)
    result = ws.run(*items)
    assert result.commands[0].state == "failed"
    assert "exactly one content ARG" in result.commands[0].reason
    assert snapshot(ws.base) == before


def test_nul_in_content_is_refused():
    with pytest.raises(ValidationError, match="NUL"):
        FileCommandInput(value=[("tee", "CMD"), ("a\x00b", "ARG"), ("notes/x", "PTH")])


def test_unencodable_content_is_a_clear_error_and_writes_nothing(ws):
    before = snapshot(ws.base)
    result = ws.run("tee:CMD", "bad \ud800:ARG", "notes/s.txt:PTH")
    assert result.commands[0].state == "failed"
    assert "not valid text" in result.commands[0].reason
    assert snapshot(ws.base) == before


def test_content_to_a_denied_destination_is_denied_and_changes_nothing(ws):
    private = snapshot(ws.base / "private")
    outside = ws.outside_snapshot()
    for target in ("private/key.txt", "../outside/secret.txt", "private/new.txt"):
        result = ws.run("tee:CMD", "pwned:ARG", f"{target}:PTH")
        assert result.commands[0].state == "denied", target
        assert result.exit_status == 126
    assert snapshot(ws.base / "private") == private
    assert ws.outside_snapshot() == outside


def test_ask_prompts_for_a_content_write(tmp_path):
    ws = make_workspace(tmp_path, ask=(PermissionRule(pattern="notes/sub/**"),))
    refuse = ScriptedIO("no")
    with use_user_io(refuse):
        result = ws.run("tee:CMD", "text:ARG", "notes/sub/asked.txt:PTH")
    assert result.commands[0].state == "denied" and "did not approve" in result.value
    assert not (ws.base / "notes/sub/asked.txt").exists()
    assert len(refuse.prompts) == 1 and "create notes/sub/asked.txt" in refuse.prompts[0]
    with use_user_io(ScriptedIO("yes")):
        result = ws.run("tee:CMD", "text:ARG", "notes/sub/asked.txt:PTH")
    assert result.exit_status == 0
    assert (ws.base / "notes/sub/asked.txt").read_bytes() == b"text"


def test_the_instructions_show_inline_content():
    text = filesystem_instructions()
    assert '["tee","CMD"]' in text and "ARG" in text
    assert "CONTENT_ARG" in text
