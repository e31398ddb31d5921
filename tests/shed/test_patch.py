"""apply_patch: literal replacement semantics, byte preservation, atomicity, permissions."""

from __future__ import annotations

import os
import stat

import pytest

from roboz.runtime.io import use_user_io
from roboz.shed.guard import AccessError, CommandGuard, PermissionDenied
from roboz.shed.models import Operation, PermissionRule
from roboz.shed.patch import PatchError, apply_patch
from roboz.shed.patch.engine import find_matches
from roboz.shed.tools import FilesystemContext
from roboz.shed.tools.patch import PatchInput, get_apply_patch

from .fileutil import SECRET, ScriptedIO, make_workspace, snapshot


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path)


def patch(ws, path, old, new, **kw):
    return apply_patch(ws.policy, path, old, new, **kw)


def test_single_replacement_keeps_other_bytes(ws):
    target = ws.base / "notes/data.txt"
    original = b"line one\r\n\xff\xfe raw bytes\r\nkey = old\r\ntail\xc3"
    target.write_bytes(original)
    outcome = patch(ws, "notes/data.txt", "key = old", "key = new")
    assert outcome.replacements == 1
    assert target.read_bytes() == original.replace(b"key = old", b"key = new")


def test_crlf_file_matches_lf_text(ws):
    target = ws.base / "notes/crlf.txt"
    target.write_bytes(b"a\r\nb\r\nc\r\n")
    outcome = patch(ws, "notes/crlf.txt", "a\nb\n", "a\nB\n")
    assert target.read_bytes() == b"a\r\nB\r\nc\r\n"
    assert "CRLF" in outcome.describe()


def test_ambiguous_and_missing_matches_change_nothing(ws):
    target = ws.base / "notes/a.txt"
    before = target.read_bytes()
    with pytest.raises(PatchError, match="matches more than one place"):
        patch(ws, "notes/a.txt", "line", "LINE")
    with pytest.raises(PatchError, match="not found"):
        patch(ws, "notes/a.txt", "gamma", "x")
    target.write_bytes(b"aaa")
    with pytest.raises(PatchError, match="overlapping"):
        patch(ws, "notes/a.txt", "aa", "b")
    with pytest.raises(PatchError, match="overlapping"):
        patch(ws, "notes/a.txt", "aa", "b", replace_all=True)
    assert target.read_bytes() == b"aaa"
    target.write_bytes(before)
    assert patch(ws, "notes/a.txt", "line", "LINE", replace_all=True).replacements == 2
    assert target.read_bytes() == b"alpha LINE\nbeta LINE\n"


def test_empty_old_string_writes_or_creates_with_parents(ws):
    assert patch(ws, "notes/a.txt", "", "whole\n").created is False
    assert (ws.base / "notes/a.txt").read_bytes() == b"whole\n"
    outcome = patch(ws, "notes/new/deeper/file.txt", "", "made\n")
    assert outcome.created
    assert (ws.base / "notes/new/deeper/file.txt").read_bytes() == b"made\n"


def test_creating_parents_needs_create_on_each(tmp_path):
    ws = make_workspace(
        tmp_path,
        allow=(
            PermissionRule(pattern="notes/**", operations={Operation.READ}),
            PermissionRule(pattern="notes/x/y/**", operations={Operation.CREATE}),
        ),
    )
    with pytest.raises(PermissionDenied):
        patch(ws, "notes/x/y/z.txt", "", "data")
    assert not (ws.base / "notes/x").exists()


def test_mode_is_kept_and_no_temp_files_remain(ws):
    target = ws.base / "notes/script.sh"
    target.write_bytes(b"echo old\n")
    target.chmod(0o751)
    patch(ws, "notes/script.sh", "old", "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(os.listdir(ws.base / "notes")) == ["a.txt", "script.sh", "sub"]


def test_write_is_atomic_rename(ws):
    target = ws.base / "notes/a.txt"
    inode = target.stat().st_ino
    patch(ws, "notes/a.txt", "alpha", "ALPHA")
    assert target.stat().st_ino != inode  # replaced by rename, never written in place


def test_invalid_text_is_a_clear_error_and_nothing_changes(ws):
    before = snapshot(ws.base)
    with pytest.raises(PatchError, match="not valid text"):
        patch(ws, "notes/a.txt", "alpha", "bad \ud800 surrogate")
    with pytest.raises(PatchError, match="not valid text"):
        patch(ws, "notes/new.txt", "", "\udcff")
    assert snapshot(ws.base) == before


def test_denied_paths_and_symlinks_out(ws):
    os.symlink(ws.outside / "secret.txt", ws.base / "notes/link.txt")
    os.symlink(ws.outside / "dir", ws.base / "notes/dirlink")
    os.link(ws.outside / "secret.txt", ws.base / "notes/hard.txt")
    before = ws.outside_snapshot()
    for path, old in (
        ("private/key.txt", ""),
        ("../outside/secret.txt", "TOP"),
        (f"{ws.outside}/new.txt", ""),
        ("notes/link.txt", "TOP"),
        ("notes/link.txt", ""),
        ("notes/dirlink/inner.txt", ""),
        ("notes/dirlink/new.txt", ""),
        ("notes/../private/key.txt", "TOP"),
    ):
        with pytest.raises(PermissionDenied):
            patch(ws, path, old, "PWNED")
    with pytest.raises(AccessError, match="hard links"):
        patch(ws, "notes/hard.txt", "TOP", "PWNED")
    assert ws.outside_snapshot() == before
    assert (ws.base / "private/key.txt").read_bytes() == SECRET


def test_swap_for_symlink_between_check_and_write(ws, monkeypatch):
    target = ws.base / "notes/a.txt"
    original_confirm = CommandGuard.confirm

    def swapping_confirm(self):
        original_confirm(self)
        target.rename(ws.base / "notes/original.txt")
        os.symlink(ws.outside / "secret.txt", target)

    monkeypatch.setattr(CommandGuard, "confirm", swapping_confirm)
    before = ws.outside_snapshot()
    patch(ws, "notes/a.txt", "alpha", "ALPHA")
    assert ws.outside_snapshot() == before
    # the content came from the checked file; the symlink itself was replaced, not followed
    assert target.read_bytes() == b"ALPHA line\nbeta line\n" and not target.is_symlink()


def test_ask_for_create(tmp_path):
    ws = make_workspace(tmp_path, ask=(PermissionRule(pattern="notes/sub/**"),))
    with use_user_io(ScriptedIO("no")), pytest.raises(PermissionDenied, match="not approve"):
        patch(ws, "notes/sub/b.md", "beta", "gamma")
    assert (ws.base / "notes/sub/b.md").read_bytes() == b"# title\nbeta\n"
    with use_user_io(ScriptedIO("y")):
        patch(ws, "notes/sub/b.md", "beta", "gamma")
    assert (ws.base / "notes/sub/b.md").read_bytes() == b"# title\ngamma\n"


def test_missing_file_and_directory_targets(ws):
    with pytest.raises(AccessError, match="no such file"):
        patch(ws, "notes/none.txt", "x", "y")
    with pytest.raises(AccessError, match="is a directory"):
        patch(ws, "notes/sub", "", "y")


class _CountingBytes(bytes):
    """File content that counts the searches made in it."""

    searches = 0

    def find(self, *args: object) -> int:  # type: ignore[override]
        type(self).searches += 1
        return super().find(*args)  # type: ignore[arg-type]


def test_an_ambiguous_old_string_is_refused_after_a_bounded_number_of_searches(ws):
    # Every offset of the first half matches: listing them all took one search each, each
    # as long as the needle (41 s for 200,000 bytes); two matches are enough to refuse.
    data = _CountingBytes(b"a" * 2_000)
    with pytest.raises(PatchError, match="overlapping"):
        find_matches(data, b"a" * 1_000, replace_all=False)
    assert _CountingBytes.searches <= 3
    _CountingBytes.searches = 0
    with pytest.raises(PatchError, match="overlapping"):
        find_matches(data, b"a" * 1_000, replace_all=True)
    assert _CountingBytes.searches <= 3
    _CountingBytes.searches = 0
    spaced = _CountingBytes(b"ab" * 1_000)
    with pytest.raises(PatchError, match="more than one place"):
        find_matches(spaced, b"ab", replace_all=False)
    assert _CountingBytes.searches <= 3
    assert len(find_matches(spaced, b"ab", replace_all=True)) == 1_000
    target = ws.base / "notes/big.txt"
    target.write_bytes(b"a" * 200_000)
    with pytest.raises(PatchError, match="overlapping"):
        patch(ws, "notes/big.txt", "a" * 100_000, "b")
    assert target.read_bytes() == b"a" * 200_000


def test_a_path_that_cannot_name_a_file_says_what_is_wrong(ws):
    before = snapshot(ws.base)
    with pytest.raises(AccessError, match=r"path contains a NUL byte \(at character 5\)"):
        patch(ws, "notes\x00a.txt", "", "x")
    with pytest.raises(AccessError, match="path is empty"):
        patch(ws, "", "", "x")
    with pytest.raises(AccessError, match="path is not a file name"):
        patch(ws, "notes/\ud800", "", "x")
    chain = get_apply_patch(FilesystemContext(permissions=ws.policy))
    said = chain[0].run(PatchInput(path="notes/\x00", old_string="", new_string="x"), [])
    assert said.value == (
        "apply_patch: path contains a NUL byte (at character 6); no file name can; "
        "nothing was changed"
    )
    assert snapshot(ws.base) == before


def test_a_surrogate_escaped_name_from_disk_is_patched(ws):
    # os.fsdecode of a name that is not UTF-8: the engine works on it byte for byte.
    raw = os.fsencode(str(ws.base)) + b"/notes/caf\xe9.txt"
    with open(raw, "wb") as handle:
        handle.write(b"old\n")
    outcome = patch(ws, os.fsdecode(b"notes/caf\xe9.txt"), "old", "new")
    assert outcome.replacements == 1
    with open(raw, "rb") as handle:
        assert handle.read() == b"new\n"
