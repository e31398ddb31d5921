"""A file whose name is not UTF-8 in the project: every command works on it, and the LLM is
shown its name losslessly, each byte that is not UTF-8 as ``\\xHH`` (as in output).

Inside the engine names are ``os.fsdecode`` strings (such a byte is a surrogate U+DC80..
U+DCFF), so a name read from disk can be given back to a command; the LLM names the file by a
glob (``*`` in place of the escaped bytes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roboz.shed.files import FileCommandResult

from .fileutil import Workspace, make_workspace

BAD = b"caf\xe9.txt"
SHOWN = "caf\\xe9.txt"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = make_workspace(tmp_path)
    folder = os.fsencode(workspace.base / "notes" / "d")
    os.mkdir(folder)
    with open(folder + b"/" + BAD, "wb") as handle:
        handle.write(b"hello\n")
    with open(folder + b"/plain.txt", "wb") as handle:
        handle.write(b"hello too\n")
    return workspace


def ran(result: FileCommandResult) -> str:
    assert result.exit_status == 0, result.value
    assert [c.state for c in result.commands] == ["ran"], result.value
    result.value.encode("utf-8")  # what the LLM is sent can be stored and sent
    return result.value


def test_listing_and_searching_show_the_name_escaped(ws: Workspace) -> None:
    assert SHOWN in ran(ws.run("ls:CMD", "notes/d:PTH"))
    assert f"notes/d/{SHOWN}" in ran(ws.run("ls:CMD", "notes/d/*:PTH"))
    assert f"notes/d/{SHOWN}:hello" in ran(ws.run("grep:CMD", "-r:FLG", "hello:ARG", "notes/d:PTH"))
    assert f"notes/d/{SHOWN}:hello" in ran(ws.run("rg:CMD", "hello:ARG", "notes/d:PTH"))
    assert f"notes/d/{SHOWN}" in ran(ws.run("find:CMD", "notes/d:PTH"))
    counted = ran(ws.run("wc:CMD", "-l:FLG", "notes/d/*:PTH"))
    assert f"1 notes/d/{SHOWN}" in counted and "2 total" in counted
    heads = ran(ws.run("head:CMD", "notes/d/*:PTH"))
    assert f"==> notes/d/{SHOWN} <==\nhello" in heads


def test_a_glob_reaches_the_file_and_the_escaped_name_is_shown(ws: Workspace) -> None:
    shown = ran(ws.run("cat:CMD", "notes/d/caf*.txt:PTH"))
    assert "hello" in shown
    name = os.fsdecode(b"notes/d/" + BAD)
    both = ran(ws.run("diff:CMD", f"{name}:PTH", f"{name}:PTH"))
    assert f"$ diff 'notes/d/{SHOWN}' 'notes/d/{SHOWN}'" in both


def test_removing_it_reports_in_the_escaped_form(ws: Workspace) -> None:
    folder = os.fsencode(ws.base / "notes" / "d")
    replacement = folder + b"/" + BAD + b".new"

    def swap(call: object) -> None:  # after the checks: the entry is replaced
        with open(replacement, "wb") as handle:
            handle.write(b"other\n")
        os.replace(replacement, folder + b"/" + BAD)

    result = ws.run("rm:CMD", "notes/d/caf*.txt:PTH", hook=swap)
    assert result.exit_status == 1
    assert f"rm: notes/d/{SHOWN}: changed since it was checked; not removed" in result.value
    result.value.encode("utf-8")
    assert BAD in os.listdir(folder)
    ran(ws.run("rm:CMD", "-r:FLG", "notes/d/*:PTH"))
    assert os.listdir(folder) == []


def test_a_path_that_cannot_be_a_file_name_is_a_syntax_error(ws: Workspace) -> None:
    result = ws.run("cat:CMD", "notes/\ud800:PTH")
    assert result.commands[0].state == "failed"
    assert "cat: path notes/\\ud800 is not a file name" in result.value
    result.value.encode("utf-8")
