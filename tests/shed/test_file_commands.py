"""run_file_command: what each command does, operators, globs, limits, reporting."""

from __future__ import annotations

import os

import pytest

from roboz.shed.files import SPECS, FileCommandInput, Limits, allowlist_text
from roboz.shed.files.process import find_binary
from roboz.shed.skills import filesystem_instructions

from .fileutil import make_workspace


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)


def stdout(result, index=0):
    return result.commands[index].stdout


def test_cat_head_tail_wc(ws):
    assert stdout(ws.run("cat:CMD", "notes/a.txt:PTH")) == "alpha line\nbeta line\n"
    assert stdout(ws.run("cat:CMD", "-n:FLG", "notes/a.txt:PTH")).startswith("     1\talpha")
    assert stdout(ws.run("head:CMD", "-n:FLG", "1:ARG", "notes/a.txt:PTH")) == "alpha line\n"
    assert stdout(ws.run("tail:CMD", "-n:FLG", "1:ARG", "notes/a.txt:PTH")) == "beta line\n"
    assert stdout(ws.run("tail:CMD", "-n:FLG", "+2:ARG", "notes/a.txt:PTH")) == "beta line\n"
    assert stdout(ws.run("head:CMD", "-c:FLG", "3:ARG", "notes/a.txt:PTH")) == "alp"
    assert stdout(ws.run("wc:CMD", "-l:FLG", "notes/a.txt:PTH")) == "2 notes/a.txt\n"


def test_pwd_prints_the_base(ws):
    assert stdout(ws.run("pwd:CMD")) == f"{ws.base}\n"


def test_pipe_into_tee_then_count(ws):
    result = ws.run(
        "cat:CMD",
        "notes/a.txt:PTH",
        "|:CTL",
        "tee:CMD",
        "notes/copy.txt:PTH",
        "&&:CTL",
        "wc:CMD",
        "-l:FLG",
        "notes/copy.txt:PTH",
    )
    assert result.exit_status == 0
    assert (ws.base / "notes/copy.txt").read_bytes() == b"alpha line\nbeta line\n"
    assert stdout(result, 2) == "2 notes/copy.txt\n"
    assert "sequence: 3 command(s): 3 ran; exit status 0" in result.value


def test_tee_append(ws):
    ws.run("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "-a:FLG", "notes/a.txt:PTH")
    assert (ws.base / "notes/a.txt").read_bytes() == b"alpha line\nbeta line\n" * 2


def test_touch_mkdir_cp_mv_rm(ws):
    notes = ws.base / "notes"
    assert ws.run("touch:CMD", "notes/new.txt:PTH").exit_status == 0
    assert (notes / "new.txt").read_bytes() == b""
    assert ws.run("mkdir:CMD", "-p:FLG", "notes/x/y/z:PTH").exit_status == 0
    assert (notes / "x/y/z").is_dir()
    assert ws.run("mkdir:CMD", "notes/q/r:PTH").exit_status != 0
    assert ws.run("cp:CMD", "notes/a.txt:PTH", "notes/x/c.txt:PTH").exit_status == 0
    assert (notes / "x/c.txt").read_bytes() == (notes / "a.txt").read_bytes()
    assert ws.run("cp:CMD", "-r:FLG", "notes/sub:PTH", "notes/x:PTH").exit_status == 0
    assert (notes / "x/sub/b.md").read_bytes() == b"# title\nbeta\n"
    assert ws.run("cp:CMD", "notes/sub:PTH", "notes/y:PTH").commands[0].state == "failed"
    assert ws.run("mv:CMD", "notes/x/c.txt:PTH", "notes/moved.txt:PTH").exit_status == 0
    assert (notes / "moved.txt").exists() and not (notes / "x/c.txt").exists()
    assert ws.run("rm:CMD", "notes/moved.txt:PTH").exit_status == 0
    assert not (notes / "moved.txt").exists()
    assert ws.run("rm:CMD", "notes/x:PTH").commands[0].state == "failed"
    assert ws.run("rm:CMD", "-r:FLG", "notes/x:PTH").exit_status == 0
    assert not (notes / "x").exists()
    assert ws.run("rm:CMD", "-f:FLG", "notes/none.txt:PTH").exit_status == 0


def test_cp_into_directory_with_several_sources(ws):
    (ws.base / "notes/dest").mkdir()
    result = ws.run("cp:CMD", "notes/a.txt:PTH", "notes/sub/b.md:PTH", "notes/dest:PTH")
    assert result.exit_status == 0
    assert sorted(os.listdir(ws.base / "notes/dest")) == ["a.txt", "b.md"]


def test_grep_rg_find_ls_diff(ws):
    grep = ws.run("grep:CMD", "-rn:FLG", "beta:ARG", "notes:PTH")
    assert sorted(stdout(grep).splitlines()) == ["notes/a.txt:2:beta line", "notes/sub/b.md:2:beta"]
    rg = ws.run("rg:CMD", "-n:FLG", "--sort:FLG", "path:ARG", "beta:ARG", "notes:PTH")
    assert rg.commands[0].state == "failed"  # --sort is not on the allowlist
    rg = ws.run("rg:CMD", "-n:FLG", "beta:ARG", "notes:PTH")
    assert sorted(stdout(rg).splitlines()) == ["notes/a.txt:2:beta line", "notes/sub/b.md:2:beta"]
    find = ws.run("find:CMD", "notes:PTH", "-name:FLG", "*.md:ARG")
    assert stdout(find) == "notes/sub/b.md\n"
    find = ws.run("find:CMD", "notes:PTH", "-type:FLG", "d:ARG")
    assert sorted(stdout(find).split()) == ["notes", "notes/sub"]
    ls = ws.run("ls:CMD", "notes:PTH")
    assert stdout(ls).split() == ["a.txt", "sub"]
    (ws.base / "notes/c.txt").write_bytes(b"alpha line\nBETA\n")
    diff = ws.run("diff:CMD", "-u:FLG", "notes/a.txt:PTH", "notes/c.txt:PTH")
    assert diff.exit_status == 1
    assert "--- notes/a.txt" in stdout(diff) and "+BETA" in stdout(diff)
    assert "/proc/self/fd" not in stdout(diff)


def test_grep_reads_piped_input_and_pattern_needs_arg(ws):
    result = ws.run("cat:CMD", "notes/a.txt:PTH", "|:CTL", "grep:CMD", "alpha:ARG")
    assert stdout(result, 1) == "alpha line\n"
    result = ws.run("grep:CMD", "alpha:PTH", "notes/a.txt:PTH")
    assert result.commands[0].state == "failed" and "tag it ARG" in result.commands[0].reason


def test_grep_and_rg_without_paths_search_the_base(tmp_path):
    from roboz.shed.models import ActionVerdict

    ws = make_workspace(tmp_path, default_verdict=ActionVerdict.allow, allow=())
    (ws.base / "private" / "key.txt").unlink()
    out = stdout(ws.run("grep:CMD", "-rl:FLG", "title:ARG"))
    assert out.strip() == "./notes/sub/b.md"
    out = stdout(ws.run("rg:CMD", "-l:FLG", "title:ARG"))
    assert out.strip() in ("./notes/sub/b.md", "notes/sub/b.md")


def test_gio_trash_moves_to_the_trash(ws, monkeypatch):
    home = ws.root / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    result = ws.run("gio:CMD", "trash:ARG", "notes/a.txt:PTH")
    assert result.exit_status == 0, result.value
    assert not (ws.base / "notes/a.txt").exists()
    trashed = list((home / ".local/share/Trash/files").iterdir()) + list(
        ws.root.glob(".Trash-*/files/*")
    )
    assert any(p.read_bytes() == b"alpha line\nbeta line\n" for p in trashed)


def test_operators_and_or_semicolon(ws):
    result = ws.run("cat:CMD", "notes/none:PTH", "&&:CTL", "cat:CMD", "notes/a.txt:PTH")
    assert [c.state for c in result.commands] == ["failed", "skipped"]
    result = ws.run("cat:CMD", "notes/none:PTH", "||:CTL", "cat:CMD", "notes/a.txt:PTH")
    assert [c.state for c in result.commands] == ["failed", "ran"]
    assert result.exit_status == 0
    result = ws.run("cat:CMD", "notes/a.txt:PTH", "||:CTL", "cat:CMD", "notes/none:PTH")
    assert [c.state for c in result.commands] == ["ran", "skipped"]
    result = ws.run("cat:CMD", "notes/none:PTH", ";:CTL", "pwd:CMD")
    assert [c.state for c in result.commands] == ["failed", "ran"]
    # a && b || c: left to right
    result = ws.run(
        "cat:CMD", "notes/none:PTH", "&&:CTL", "pwd:CMD", "||:CTL", "ls:CMD", "notes:PTH"
    )
    assert [c.state for c in result.commands] == ["failed", "skipped", "ran"]


def test_pipeline_binds_before_and(ws):
    result = ws.run(
        "cat:CMD", "notes/a.txt:PTH", "|:CTL", "grep:CMD", "zzz:ARG", "&&:CTL", "pwd:CMD"
    )
    assert [c.state for c in result.commands] == ["ran", "ran", "skipped"]


def test_globs(ws):
    (ws.base / "notes/c.txt").write_bytes(b"c\n")
    (ws.base / "notes/.hidden.txt").write_bytes(b"h\n")
    assert stdout(ws.run("cat:CMD", "notes/*.txt:PTH")) == "alpha line\nbeta line\nc\n"
    assert stdout(ws.run("wc:CMD", "-l:FLG", "notes/**/*.md:PTH")) == "2 notes/sub/b.md\n"
    result = ws.run("cat:CMD", "notes/*.none:PTH")
    assert result.commands[0].state == "failed" and "no match" in result.commands[0].reason
    for bad in ("notes/?.txt", "notes/[ab].txt"):
        result = ws.run("cat:CMD", f"{bad}:PTH")
        assert "not supported" in result.commands[0].reason
    result = ws.run("cp:CMD", "notes/a.txt:PTH", "notes/*.bak:PTH")
    assert "literal" in result.commands[0].reason


def test_syntax_errors_are_clear(ws):
    cases = {
        ("echo:CMD", "hi:ARG"): "unknown command",
        ("cat:CMD", ">:CTL", "notes/x:PTH"): "not a control operator",
        ("cat:CMD", "notes/a.txt:PTH", "&&:CTL"): "must end with a command",
        ("cat:CMD", "-A:FLG", "notes/a.txt:PTH"): "not allowed",
        ("head:CMD", "-n:FLG", "x:ARG", "notes/a.txt:PTH"): "invalid value",
        ("head:CMD", "-n:FLG"): "needs a value",
        ("gio:CMD", "info:ARG", "notes/a.txt:PTH"): "only 'gio trash'",
        ("notes/a.txt:PTH",): "must follow a CMD",
    }
    for items, expected in cases.items():
        result = ws.run(*items)
        assert result.exit_status != 0
        assert expected in result.value, (items, result.value)


def test_double_dash_ends_options(ws):
    (ws.base / "notes/-n").write_bytes(b"dash\n")
    assert stdout(ws.run("cat:CMD", "--:FLG", "notes/-n:PTH")) == "dash\n"


def test_output_cap_and_timeout_are_reported(ws):
    (ws.base / "notes/big.txt").write_bytes(b"x" * 5000 + b"\n")
    result = ws.run("cat:CMD", "notes/big.txt:PTH", limits=Limits(output_limit=100))
    assert "exceeded 100 bytes" in result.value and len(result.commands[0].stdout) == 100
    result = ws.run("grep:CMD", "-r:FLG", "x:ARG", "notes:PTH", limits=Limits(output_limit=100))
    assert "more than 100 bytes" in result.value
    result = ws.run("find:CMD", "notes:PTH", limits=Limits(timeout=0))
    assert "timed out" in result.value and result.exit_status != 0


def test_missing_binary_is_reported(ws, monkeypatch):
    monkeypatch.setenv("PATH", str(ws.root / "empty"))
    result = ws.run("rg:CMD", "beta:ARG", "notes:PTH", "||:CTL", "pwd:CMD")
    assert result.commands[0].state == "failed"
    assert "rg: the program is not installed" in result.commands[0].reason
    assert result.commands[1].state == "ran"
    with pytest.raises(Exception, match="not installed"):
        find_binary("gio")


def test_instructions_list_every_allowed_option():
    text = filesystem_instructions()
    assert allowlist_text() in text
    for spec in SPECS.values():
        assert spec.usage in text
        for option in spec.options:
            for name in option.names:
                assert name in text


def test_input_model_rejects_nul_and_bad_tags():
    with pytest.raises(ValueError):
        FileCommandInput(value=[("cat", "CMD"), ("a\x00b", "PTH")])
    with pytest.raises(ValueError):
        FileCommandInput.model_validate({"value": [["cat", "SHELL"]]})
    parsed = FileCommandInput.model_validate({"value": [["cat", "CMD"], ["a", "PTH"]]})
    assert parsed.value[1] == ("a", "PTH")


def _native(argv, cwd):
    import subprocess

    completed = subprocess.run(argv, cwd=cwd, capture_output=True, check=True)
    return completed.stdout.decode("utf-8", "backslashreplace")  # as the engine shows bytes


def test_wc_and_tail_stream_large_files_like_coreutils(ws):
    chunk = 1 << 20
    text = ("wörd " * 50_000 + "\n") * 3
    data = text.encode()
    # a word and a multi-byte character straddle the 1 MiB read boundary
    data = data[: chunk - 3] + "straddling€word".encode() + data[chunk - 3 :] + b"tail no newline"
    (ws.base / "notes/big.txt").write_bytes(data)
    for flags in (["-l"], ["-w"], ["-c"], ["-m"], []):
        ours = ws.run("wc:CMD", *[f"{f}:FLG" for f in flags], "notes/big.txt:PTH")
        native = _native(["wc", *flags, "notes/big.txt"], ws.base)
        assert ours.commands[0].stdout.split() == native.split(), flags
    for flags in (["-n", "2"], ["-n", "+3"], ["-c", "20"], ["-n", "0"]):
        ours = ws.run(
            "tail:CMD",
            f"{flags[0]}:FLG",
            f"{flags[1]}:ARG",
            "notes/big.txt:PTH",
            limits=Limits(output_limit=10_000_000),
        )
        assert ours.commands[0].stdout == _native(["tail", *flags, "notes/big.txt"], ws.base)


def test_find_newer_diff_recursive_and_ls_directory(ws):
    import os as _os

    (ws.base / "notes/old.txt").write_bytes(b"old\n")
    _os.utime(ws.base / "notes/old.txt", (1, 1))
    _os.utime(ws.base / "notes/a.txt", (10, 10))
    _os.utime(ws.base / "notes/sub/b.md", (10, 10))
    result = ws.run(
        "find:CMD", "notes:PTH", "-type:FLG", "f:ARG", "-newer:FLG", "notes/old.txt:PTH"
    )
    assert sorted(result.commands[0].stdout.split()) == ["notes/a.txt", "notes/sub/b.md"]
    ws.run("cp:CMD", "-r:FLG", "notes/sub:PTH", "notes/sub2:PTH")
    (ws.base / "notes/sub2/b.md").write_bytes(b"changed\n")
    result = ws.run("diff:CMD", "-r:FLG", "-q:FLG", "notes/sub:PTH", "notes/sub2:PTH")
    assert result.commands[0].stdout.strip() == "Files notes/sub/b.md and notes/sub2/b.md differ"
    result = ws.run("diff:CMD", "notes/sub:PTH", "notes/a.txt:PTH")
    assert result.commands[0].state == "failed"
    result = ws.run("ls:CMD", "-d:FLG", "notes/sub:PTH")
    assert result.commands[0].stdout == "notes/sub\n"


def test_symlinked_base_works(tmp_path):
    from roboz.shed.models import PermissionRule
    from roboz.shed.sandbox import PermissionPolicy

    from .fileutil import toks

    real = tmp_path / "real"
    (real / "notes").mkdir(parents=True)
    (real / "notes/x.txt").write_bytes(b"x\n")
    (tmp_path / "link").symlink_to(real)
    policy = PermissionPolicy(base=tmp_path / "link", allow=(PermissionRule(pattern="notes/**"),))
    from roboz.shed.files import FileCommandEngine

    result = FileCommandEngine(policy).run(toks("cat:CMD", "notes/x.txt:PTH"))
    assert result.commands[0].stdout == "x\n"


def test_too_many_paths_are_refused_clearly(ws):
    from roboz.shed.files.base import MAX_OPERANDS

    for index in range(MAX_OPERANDS + 1):
        (ws.base / f"notes/f{index}.log").write_bytes(b"x\n")
    result = ws.run("cat:CMD", "notes/*.log:PTH")
    assert result.commands[0].state == "failed"
    assert f"at most {MAX_OPERANDS} per command" in result.commands[0].reason
    assert ws.run("grep:CMD", "-rc:FLG", "x:ARG", "notes:PTH").exit_status == 0


def test_option_values_reach_the_programs(ws):
    result = ws.run("rg:CMD", "-l:FLG", "-g:FLG", "*.md:ARG", "beta:ARG", "notes:PTH")
    assert result.commands[0].stdout == "notes/sub/b.md\n"
    result = ws.run(
        "grep:CMD", "-rl:FLG", "--include:FLG", "*.md:ARG", "-e:FLG", "-beta:ARG", "notes:PTH"
    )
    assert result.exit_status == 1  # the pattern "-beta" is searched for, not read as flags
    result = ws.run("grep:CMD", "-c:FLG", "-m:FLG", "1:ARG", "line:ARG", "notes/a.txt:PTH")
    assert result.commands[0].stdout == "1\n"
    result = ws.run("diff:CMD", "-U:FLG", "0:ARG", "notes/a.txt:PTH", "notes/sub/b.md:PTH")
    assert "@@ -1,2 +1,2 @@" in result.commands[0].stdout


def test_python_commands_have_a_deadline_too(ws):
    (ws.base / "notes/tree").mkdir()
    for index in range(50):
        (ws.base / f"notes/tree/f{index}").write_bytes(b"x")
    result = ws.run("rm:CMD", "-r:FLG", "notes/tree:PTH", limits=Limits(timeout=0))
    assert result.exit_status == 124 and "timed out" in result.commands[0].reason
    assert len(list((ws.base / "notes/tree").iterdir())) == 50  # stopped before any removal
    result = ws.run("cat:CMD", "notes/a.txt:PTH", limits=Limits(timeout=0))
    assert result.exit_status == 124 and "timed out" in result.value


@pytest.mark.parametrize(
    "tokens",
    [
        ["ls:CMD", ".:PTH"],  # strings, not pairs
        [(1, "CMD")],
        [(("ls",), "CMD")],
        [("ls", "CMD"), (b".", "PTH")],
        [None],
    ],
    ids=["strings", "int-value", "tuple-value", "bytes-value", "none"],
)
def test_tokens_of_the_wrong_shape_are_a_refusal_not_a_crash(ws, tokens) -> None:
    from roboz.shed.files import run_file_command

    before = sorted(os.listdir(ws.base))
    result = run_file_command(ws.policy, tokens)
    assert result.exit_status == 2
    assert "syntax: each token is a (value, tag) pair of strings" in result.value
    assert sorted(os.listdir(ws.base)) == before
