"""Attacks on run_file_command: each one is attempted, must fail, and must leave everything
outside the allowed area byte-identical (and unread)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roboz.runtime.io import use_user_io
from roboz.shed.files import Limits
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy

from .fileutil import SECRET, ScriptedIO, make_workspace, snapshot


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)


def assert_untouched(ws, before_outside, before_private):
    assert ws.outside_snapshot() == before_outside
    assert snapshot(ws.base / "private") == before_private


def attempt(ws, *items, hook=None, limits=None):
    outside, private = ws.outside_snapshot(), snapshot(ws.base / "private")
    result = ws.run(*items, hook=hook, limits=limits)
    assert SECRET.decode() not in result.value
    assert all(SECRET.decode() not in c.stdout + c.stderr for c in result.commands)
    assert_untouched(ws, outside, private)
    return result


def test_dotdot_and_absolute_paths_are_denied(ws):
    for path in (
        "../outside/secret.txt",
        "notes/../../outside/secret.txt",
        f"{ws.outside}/secret.txt",
        "private/key.txt",
        "notes/../private/key.txt",
    ):
        result = attempt(ws, "cat:CMD", f"{path}:PTH")
        assert result.commands[0].state == "denied", path


def test_writes_deletes_and_creates_outside_are_denied(ws):
    for items in (
        ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", f"{ws.outside}/secret.txt:PTH"),
        ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "../outside/new.txt:PTH"),
        ("rm:CMD", f"{ws.outside}/secret.txt:PTH"),
        ("rm:CMD", "-rf:FLG", "../outside:PTH"),
        ("mv:CMD", "private/key.txt:PTH", "notes/stolen.txt:PTH"),
        ("mv:CMD", "notes/a.txt:PTH", "../outside/secret.txt:PTH"),
        ("cp:CMD", "private/key.txt:PTH", "notes/stolen.txt:PTH"),
        ("cp:CMD", "notes/a.txt:PTH", "../outside/secret.txt:PTH"),
        ("touch:CMD", "../outside/t:PTH"),
        ("mkdir:CMD", "-p:FLG", "../outside/d/e:PTH"),
        ("gio:CMD", "trash:ARG", f"{ws.outside}/secret.txt:PTH"),
    ):
        result = attempt(ws, *items)
        assert result.commands[-1].state == "denied", items
    assert not (ws.base / "notes/stolen.txt").exists()


def test_denied_paths_do_not_reveal_existence(ws):
    existing = ws.run("cat:CMD", "private/key.txt:PTH").commands[0].reason
    missing = ws.run("cat:CMD", "private/nothing.txt:PTH").commands[0].reason
    assert existing.replace("key", "X") == missing.replace("nothing", "X")
    deep = ws.run("cat:CMD", "private/no/such/dir/f:PTH").commands[0]
    assert deep.state == "denied"
    ls_existing = ws.run("ls:CMD", "private:PTH").commands[0].reason
    ls_missing = ws.run("ls:CMD", "private2:PTH").commands[0].reason
    assert ls_existing.replace("private", "X") == ls_missing.replace("private2", "X")
    # through a symlink whose target area is denied: "denied", never "no such file"
    os.symlink(ws.outside, ws.base / "notes/out")
    a = ws.run("cat:CMD", "notes/out/secret.txt:PTH").commands[0]
    b = ws.run("cat:CMD", "notes/out/nothing/x.txt:PTH").commands[0]
    assert a.state == b.state == "denied"
    assert "no such" not in a.reason + b.reason


def test_symlinks_in_any_component_are_resolved_and_checked(ws):
    os.symlink(ws.outside / "secret.txt", ws.base / "notes/link.txt")
    os.symlink(ws.outside / "dir", ws.base / "notes/dirlink")
    os.symlink("../../private", ws.base / "notes/sub/priv")
    for items in (
        ("cat:CMD", "notes/link.txt:PTH"),
        ("cat:CMD", "notes/dirlink/inner.txt:PTH"),
        ("cat:CMD", "notes/sub/priv/key.txt:PTH"),
        ("ls:CMD", "notes/dirlink:PTH"),
        ("grep:CMD", "-r:FLG", "SECRET:ARG", "notes/dirlink:PTH"),
        ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/link.txt:PTH"),
        ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/dirlink/new.txt:PTH"),
        ("cp:CMD", "notes/a.txt:PTH", "notes/dirlink:PTH"),
        ("find:CMD", "notes/dirlink:PTH"),
        ("diff:CMD", "notes/a.txt:PTH", "notes/link.txt:PTH"),
    ):
        result = attempt(ws, *items)
        assert result.commands[-1].state == "denied", (items, result.value)
    assert not (ws.outside / "dir/new.txt").exists()


def test_recursion_never_follows_symlinks_out(ws):
    (ws.base / "notes/empty").mkdir()
    os.symlink(ws.outside, ws.base / "notes/sub/out")
    os.symlink(ws.outside / "secret.txt", ws.base / "notes/sub/s.txt")
    for items in (
        ("grep:CMD", "-r:FLG", "SECRET:ARG", "notes:PTH"),
        ("rg:CMD", "SECRET:ARG", "notes:PTH"),
        ("find:CMD", "notes:PTH", "-name:FLG", "inner.txt:ARG"),
        ("ls:CMD", "-R:FLG", "notes:PTH"),
        ("diff:CMD", "-r:FLG", "notes/sub:PTH", "notes/empty:PTH"),
        ("diff:CMD", "-r:FLG", "-N:FLG", "notes/sub:PTH", "notes/empty:PTH"),
        ("cat:CMD", "notes/**/*.txt:PTH"),
        ("cp:CMD", "-r:FLG", "notes/sub:PTH", "notes/copy:PTH"),
        ("rm:CMD", "-r:FLG", "notes/sub:PTH"),
    ):
        result = attempt(ws, *items)
        assert all("inner.txt" not in c.stdout for c in result.commands), items
    # rm -r removed the links themselves, not what they point to
    assert not (ws.base / "notes/sub").exists()


def test_swap_file_for_symlink_between_check_and_read(ws):
    victim = ws.base / "notes/a.txt"

    def swap(call):
        victim.rename(ws.base / "notes/original.txt")
        os.symlink(ws.outside / "secret.txt", victim)

    for items in (
        ("cat:CMD", "notes/a.txt:PTH"),
        ("grep:CMD", "-H:FLG", "E:ARG", "notes/a.txt:PTH"),
        ("rg:CMD", "E:ARG", "notes/a.txt:PTH"),
        ("wc:CMD", "notes/a.txt:PTH"),
        ("diff:CMD", "notes/a.txt:PTH", "notes/sub/b.md:PTH"),
        ("head:CMD", "notes/a.txt:PTH"),
    ):
        result = attempt(ws, *items, hook=swap)
        assert result.commands[0].state == "ran", result.value
        victim.unlink()
        (ws.base / "notes/original.txt").rename(victim)


def test_swap_file_for_symlink_between_check_and_write(ws):
    victim = ws.base / "notes/a.txt"

    def swap(call):
        if call.name == "tee":
            victim.rename(ws.base / "notes/original.txt")
            os.symlink(ws.outside / "secret.txt", victim)

    result = attempt(
        ws, "cat:CMD", "notes/sub/b.md:PTH", "|:CTL", "tee:CMD", "notes/a.txt:PTH", hook=swap
    )
    assert result.commands[1].state == "ran"
    # the write went to the checked inode, not through the symlink
    assert (ws.base / "notes/original.txt").read_bytes() == b"# title\nbeta\n"
    assert (ws.outside / "secret.txt").read_bytes() == SECRET


def test_swap_new_file_name_for_symlink_before_create(ws):
    target = ws.base / "notes/new.txt"

    def swap(call):
        if call.name == "tee":
            os.symlink(ws.outside / "planted.txt", target)

    attempt(ws, "cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/new.txt:PTH", hook=swap)
    assert not (ws.outside / "planted.txt").exists()


def test_swap_directory_for_symlink_between_check_and_use(ws):
    sub = ws.base / "notes/sub"

    def swap(call):
        sub.rename(ws.base / "notes/sub-original")
        os.symlink(ws.outside / "dir", sub)

    for items in (
        ("grep:CMD", "-r:FLG", "SECRET:ARG", "notes/sub:PTH"),
        ("rg:CMD", "SECRET:ARG", "notes/sub:PTH"),
        ("find:CMD", "notes/sub:PTH"),
        ("ls:CMD", "notes/sub:PTH"),
        ("cat:CMD", "notes/sub/b.md:PTH"),
        ("rm:CMD", "-r:FLG", "notes/sub:PTH"),
        ("cp:CMD", "-r:FLG", "notes/sub:PTH", "notes/copy:PTH"),
    ):
        result = attempt(ws, *items, hook=swap)
        assert all("inner.txt" not in c.stdout for c in result.commands), items
        if sub.is_symlink():
            sub.unlink()
        if (ws.base / "notes/sub-original").exists():
            (ws.base / "notes/sub-original").rename(sub)
        else:  # rm -r removed the pinned original directory, which is what was checked
            sub.mkdir()
        (ws.base / "notes/sub/b.md").write_bytes(b"# title\nbeta\n")


def test_swap_parent_directory_before_create(ws):
    sub = ws.base / "notes/sub"

    def swap(call):
        if call.name == "tee":
            sub.rename(ws.base / "notes/sub-original")
            os.symlink(ws.outside / "dir", sub)

    attempt(
        ws, "cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/sub/new.txt:PTH", hook=swap
    )
    assert (ws.base / "notes/sub-original/new.txt").exists()
    assert not (ws.outside / "dir/new.txt").exists()


def test_hard_links_are_refused(ws):
    os.link(ws.outside / "secret.txt", ws.base / "notes/hard.txt")
    for items in (
        ("cat:CMD", "notes/hard.txt:PTH"),
        ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/hard.txt:PTH"),
        ("grep:CMD", "-r:FLG", "SECRET:ARG", "notes:PTH"),
        ("rg:CMD", "SECRET:ARG", "notes:PTH"),
        ("cp:CMD", "notes/hard.txt:PTH", "notes/copy.txt:PTH"),
    ):
        result = attempt(ws, *items)
        assert "hard" in result.value and result.commands[-1].state == "failed", items


def test_fifos_and_devices_are_refused(tmp_path):
    ws = make_workspace(
        tmp_path,
        allow=(
            PermissionRule(pattern="notes/**"),
            PermissionRule(pattern="/dev/**", operations={Operation.READ}),
        ),
    )
    os.mkfifo(ws.base / "notes/fifo")
    for items in (
        ("cat:CMD", "notes/fifo:PTH"),
        ("head:CMD", "notes/fifo:PTH"),
        ("cat:CMD", "/dev/zero:PTH"),
        ("grep:CMD", "x:ARG", "/dev/zero:PTH"),
        ("grep:CMD", "-r:FLG", "x:ARG", "notes:PTH"),
        ("cat:CMD", "notes/a.txt:PTH", "|:CTL", "tee:CMD", "notes/fifo:PTH"),
    ):
        result = attempt(ws, *items, limits=Limits(timeout=5))
        assert result.commands[-1].state == "failed", items
        assert "FIFO" in result.value or "device" in result.value


def test_dangerous_flags_are_not_available(ws):
    (ws.base / "notes/keep.txt").write_bytes(b"keep\n")
    before = snapshot(ws.base)
    for items in (
        ("find:CMD", "notes:PTH", "-delete:FLG"),
        ("find:CMD", "notes:PTH", "-exec:FLG", "rm:ARG", "{}:ARG", ";:ARG"),
        ("find:CMD", "notes:PTH", "-execdir:FLG", "rm:ARG"),
        ("find:CMD", "notes:PTH", "-ok:FLG", "rm:ARG"),
        ("find:CMD", "notes:PTH", "-fprint:FLG", "notes/out:PTH"),
        ("find:CMD", "notes:PTH", "-fls:FLG", "notes/out:PTH"),
        ("find:CMD", "-L:FLG", "notes:PTH"),
        ("rg:CMD", "--pre:FLG", "/bin/sh:PTH", "x:ARG", "notes:PTH"),
        ("rg:CMD", "--pre=/bin/sh:FLG", "x:ARG", "notes:PTH"),
        ("rg:CMD", "--pre-glob:FLG", "*:ARG", "x:ARG", "notes:PTH"),
        ("rg:CMD", "-L:FLG", "x:ARG", "notes:PTH"),
        ("rg:CMD", "-z:FLG", "x:ARG", "notes:PTH"),
        ("grep:CMD", "-R:FLG", "x:ARG", "notes:PTH"),
        ("grep:CMD", "-f:FLG", "x:ARG", "notes:PTH"),
    ):
        result = attempt(ws, *items)
        assert result.commands[0].state == "failed", items
    assert snapshot(ws.base) == before


def test_grep_pattern_file_is_checked_for_read(ws):
    result = attempt(ws, "grep:CMD", "-f:FLG", f"{ws.outside}/secret.txt:PTH", "notes:PTH")
    assert result.commands[0].state == "denied"
    (ws.base / "notes/pat").write_bytes(b"alpha\n")
    result = ws.run("grep:CMD", "-f:FLG", "notes/pat:PTH", "notes/a.txt:PTH")
    assert result.commands[0].stdout == "alpha line\n"


def test_flags_smuggled_as_values_stay_values(ws):
    (ws.base / "notes/keep.txt").write_bytes(b"keep\n")
    before = snapshot(ws.base)
    for items in (
        ("rg:CMD", "--pre=/bin/rm:ARG", "notes:PTH"),
        ("grep:CMD", "-f/etc/passwd:ARG", "notes/a.txt:PTH"),
        ("grep:CMD", "--include=*:ARG", "notes/a.txt:PTH"),
        ("find:CMD", "notes:PTH", "-name:FLG", "-delete:ARG"),
        ("find:CMD", "-delete:PTH"),
        ("cat:CMD", "-n:PTH"),
        ("ls:CMD", "--hide=x:PTH"),
    ):
        result = attempt(ws, *items)
        assert result.commands[0].state != "denied" or "policy" in result.value
    assert snapshot(ws.base) == before


def test_shell_characters_are_plain_text(ws):
    marker = ws.base / "notes/pwned"
    for value in (
        "$(touch notes/pwned)",
        "`touch notes/pwned`",
        "a; touch notes/pwned",
        "a && touch notes/pwned",
        "a | tee notes/pwned",
        "notes/*.txt > notes/pwned",
    ):
        attempt(ws, "grep:CMD", f"{value}:ARG", "notes/a.txt:PTH")
        attempt(ws, "cat:CMD", f"{value}:PTH")
        attempt(ws, "find:CMD", "notes:PTH", "-name:FLG", f"{value}:ARG")
    assert not marker.exists()


def test_nul_bytes_are_rejected(ws):
    result = attempt(ws, "cat:CMD", "notes/a.txt\x00../../outside/secret.txt:PTH")
    assert result.exit_status != 0


def test_rm_rf_of_base_or_its_parents_is_refused(tmp_path):
    ws = make_workspace(tmp_path, allow=(PermissionRule(pattern=f"{tmp_path}/**"),))
    before = snapshot(tmp_path)
    for target in (".", "..", str(ws.base), "/", "notes/..", str(tmp_path), "./"):
        result = ws.run("rm:CMD", "-rf:FLG", f"{target}:PTH")
        assert result.commands[0].state == "denied", target
        if target != "/":  # "/" is outside the allowed area: the policy says no first
            assert "cannot be removed" in result.commands[0].reason
        result = ws.run("gio:CMD", "trash:ARG", f"{target}:PTH")
        assert result.commands[0].state == "denied", target
    assert snapshot(tmp_path) == before


def test_recursive_commands_refuse_subtrees_with_denied_parts(tmp_path):
    ws = make_workspace(tmp_path, deny=(PermissionRule(pattern="notes/sub/**"),))
    before = snapshot(ws.base)
    for items in (
        ("grep:CMD", "-r:FLG", "beta:ARG", "notes:PTH"),
        ("rg:CMD", "beta:ARG", "notes:PTH"),
        ("find:CMD", "notes:PTH"),
        ("ls:CMD", "-R:FLG", "notes:PTH"),
        ("rm:CMD", "-r:FLG", "notes:PTH"),
        ("cp:CMD", "-r:FLG", "notes:PTH", "notes2:PTH"),
    ):
        result = ws.run(*items)
        assert result.commands[0].state == "denied", items
        assert "b.md" not in result.value
    assert snapshot(ws.base) == before
    # globs skip denied entries silently
    result = ws.run("cat:CMD", "notes/**/*.md:PTH")
    assert result.commands[0].state == "failed" and "no match" in result.value


def test_denied_command_does_not_run_and_or_falls_back(ws):
    result = attempt(
        ws,
        "cat:CMD",
        "notes/a.txt:PTH",
        "|:CTL",
        "tee:CMD",
        "private/key.txt:PTH",
        "||:CTL",
        "cat:CMD",
        "notes/a.txt:PTH",
        "|:CTL",
        "tee:CMD",
        "notes/fallback.txt:PTH",
    )
    states = [c.state for c in result.commands]
    assert states == ["ran", "denied", "ran", "ran"]
    assert (ws.base / "notes/fallback.txt").read_bytes() == b"alpha line\nbeta line\n"
    assert result.exit_status == 0
    assert "DENIED: create private/key.txt: denied by policy" in result.value


def test_ask_goes_to_the_user_and_never_overrides_deny(tmp_path):
    ws = make_workspace(
        tmp_path,
        ask=(
            PermissionRule(pattern="notes/sub/**", operations={Operation.DELETE}),
            PermissionRule(pattern="private/**"),
        ),
    )
    refuse = ScriptedIO("n")
    with use_user_io(refuse):
        result = ws.run("rm:CMD", "notes/sub/b.md:PTH")
    assert result.commands[0].state == "denied" and "did not approve" in result.value
    assert (ws.base / "notes/sub/b.md").exists()
    assert len(refuse.prompts) == 1 and "delete notes/sub/b.md" in refuse.prompts[0]
    approve = ScriptedIO("yes")
    with use_user_io(approve):
        result = ws.run("rm:CMD", "notes/sub/b.md:PTH")
    assert result.commands[0].state == "ran" and not (ws.base / "notes/sub/b.md").exists()
    # private/** is both denied by default... and asked: the explicit deny rule wins
    ws2 = make_workspace(
        tmp_path / "two",
        deny=(PermissionRule(pattern="private/**"),),
        ask=(PermissionRule(pattern="private/**"),),
    )
    io = ScriptedIO("yes")
    with use_user_io(io):
        result = ws2.run("cat:CMD", "private/key.txt:PTH")
    assert result.commands[0].state == "denied" and io.prompts == []


def test_permission_decisions_are_emitted(ws):
    from roboz.runtime.events import EventPipe
    from roboz.shed.files import FileCommandEngine
    from roboz.shed.guard import PermissionDecided

    from .fileutil import toks

    seen = []
    pipe = EventPipe([seen.append])
    FileCommandEngine(ws.policy, pipe=pipe).run(toks("cat:CMD", "private/key.txt:PTH"))
    assert [(e.operation, e.path, e.verdict) for e in seen if isinstance(e, PermissionDecided)] == [
        ("read", "private/key.txt", "deny")
    ]


def test_policy_with_allow_precedence(tmp_path):
    ws = make_workspace(
        tmp_path,
        precedence=ActionVerdict.allow,
        allow=(PermissionRule(pattern="private/**"),),
        deny=(PermissionRule(pattern="private/**"),),
    )
    assert ws.run("cat:CMD", "private/key.txt:PTH").commands[0].stdout == SECRET.decode()


def test_base_itself_is_only_as_allowed_as_the_policy_says(ws):
    result = ws.run("ls:CMD")
    assert result.commands[0].state == "denied"
    assert isinstance(ws.policy, PermissionPolicy) and Path(ws.policy.base) == ws.base


def test_option_values_cannot_smuggle_options(ws):
    """A value like ``--pre=prog`` after -t/-g/-e/... must stay a value (ripgrep would read a
    separate hyphen value as an option and run prog on every file)."""
    import stat as stat_module

    marker = ws.outside / "ran.txt"
    script = ws.root / "pre.sh"
    script.write_text(f'#!/bin/sh\necho ran >> {marker}\ncat "$1"\n')
    script.chmod(script.stat().st_mode | stat_module.S_IXUSR)
    smuggled = f"--pre={script}"
    from roboz.shed.files import SPECS

    for command in ("rg", "grep", "diff"):
        for option in SPECS[command].options:
            if option.value != "ARG" or option.check is not None:
                continue
            for name in option.names:
                operands = (
                    ["notes/a.txt:PTH", "notes/sub/b.md:PTH"]
                    if command == "diff"
                    else ["--regexp:FLG", "alpha:ARG", "notes:PTH"]
                    if name not in ("-e", "--regexp")
                    else ["notes:PTH"]
                )
                if command == "grep" and name not in ("-e", "--regexp"):
                    operands.insert(0, "-r:FLG")
                attempt(ws, f"{command}:CMD", f"{name}:FLG", f"{smuggled}:ARG", *operands)
    attempt(ws, "rg:CMD", f"{smuggled}:ARG", "notes:PTH")
    attempt(ws, "rg:CMD", "-t:FLG", "--files:ARG", "alpha:ARG", "notes:PTH")
    assert not marker.exists()
