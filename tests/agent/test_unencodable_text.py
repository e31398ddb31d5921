"""Text that cannot be encoded (lone surrogates) in any tool argument is a repairable reply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, Str
from roboz.shed.safe_scripts.tool import get_run_shell_script
from roboz.shed.tools import FilesystemContext, PdfContext, get_apply_patch, get_run_file_command
from roboz.shed.tools.pdf import get_pdf_tool
from roboz.tools import Tool, stop
from tests.shed.fileutil import make_workspace, snapshot

LONE = "\ud800"
# As a provider sends it: a JSON escape that json.loads turns into a lone surrogate.
ESCAPED = json.dumps(LONE)[1:-1]


class Note(Empty):
    title: str
    tags: list[str] = Field(default_factory=list)


calls: list[Note] = []


@tool
def write_note(input: Note, messages: list[Message]) -> Str:
    """Write a note."""
    calls.append(input)
    return Str(value="written")


def _tools(ws: Any) -> list[Tool]:
    files = FilesystemContext(permissions=ws.policy)
    return [
        *get_run_file_command(files),
        *get_apply_patch(files),
        *get_pdf_tool(PdfContext(permissions=ws.policy)),
        get_run_shell_script(ws.root / "no-helper.sock"),
        write_note,
        stop,
    ]


CASES = [
    ("run_file_command", {"value": [["tee", "CMD"], [f"notes/{LONE}.txt", "PTH"]]}, "value[1][0]"),
    (
        "run_file_command",
        {"value": [["tee", "CMD"], [f"x{LONE}", "ARG"], ["notes/n", "PTH"]]},
        "value[1][0]",
    ),
    ("run_file_command", {"value": [[f"c{LONE}at", "CMD"], ["notes/a.txt", "PTH"]]}, "value[0][0]"),
    ("apply_patch", {"path": f"notes/{LONE}", "old_string": "a", "new_string": "b"}, "path"),
    (
        "apply_patch",
        {"path": "notes/a.txt", "old_string": f"alpha{LONE}", "new_string": "b"},
        "old_string",
    ),
    (
        "apply_patch",
        {"path": "notes/a.txt", "old_string": "alpha", "new_string": LONE},
        "new_string",
    ),
    ("process_pdf", {"path": f"notes/{LONE}.pdf"}, "path"),
    ("run_shell_script", {"script": f"s{LONE}.sh"}, "script"),
    ("run_shell_script", {"script": "s.sh", "args": ["ok", f"a{LONE}"]}, "args[1]"),
    ("write_note", {"title": LONE}, "title"),
    ("write_note", {"title": "t", "tags": [LONE]}, "tags[0]"),
    ("write_note", {"title": "t", LONE: 1}, "(a name)"),
    ("stop", {"value": f"done{LONE}"}, "value"),
]


@pytest.mark.parametrize(("action", "arguments", "where"), CASES)
@pytest.mark.parametrize("escaped", [True, False], ids=["json-escape", "raw-str"])
def test_unencodable_text_goes_back_to_the_llm_naming_the_argument(
    tmp_path: Path, action: str, arguments: dict[str, Any], where: str, escaped: bool
) -> None:
    ws = make_workspace(tmp_path)
    before = snapshot(ws.root)
    calls.clear()
    bad = json.dumps({"action": action, **arguments}, ensure_ascii=False, default=str)
    # json.dumps(ensure_ascii=False) keeps the surrogate raw; the escaped form is what a
    # provider's JSON would hold.
    reply = bad.replace(LONE, ESCAPED) if escaped else bad
    endpoint = MockLLMEndpoint([reply, {"action": "stop", "value": "recovered"}])
    agent = Agent(name="u", agent_endpoint=endpoint, tools=_tools(ws))

    result, messages = agent.invoke()

    assert result.value == "recovered"
    correction = endpoint.requests[1][-1]["content"]
    assert "cannot be encoded as UTF-8" in correction and where in correction
    assert [m.message_kind for m in messages[:2]] == ["rejected_reply", "repair"]
    # Everything kept in the conversation can be sent again.
    for message in messages:
        message.model_dump_json().encode("utf-8")
    assert calls == []
    assert snapshot(ws.root) == before


def test_the_rationale_is_checked_too() -> None:
    endpoint = MockLLMEndpoint(
        [f'{{"action": "stop", "rationale": "{ESCAPED}"}}', {"action": "stop", "value": "ok"}]
    )
    result, _ = Agent(name="u", agent_endpoint=endpoint, tools=[stop]).invoke()
    assert result.value == "ok"
    assert "'rationale'" in endpoint.requests[1][-1]["content"]
