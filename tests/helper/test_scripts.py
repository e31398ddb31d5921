"""Script lookup and listing, directly on a directory tree (no daemon, no root needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from roboz_helper.scripts import (
    ScriptRefused,
    check_relative_path,
    describe,
    list_scripts,
    open_script,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "scripts"
    (root / "a" / "b").mkdir(parents=True)
    for rel in ("top.sh", "a/b/deep.sh"):
        (root / rel).write_text(f"#!/bin/sh\n# {rel}\n")
        (root / rel).chmod(0o755)
    (root / "a" / "up").symlink_to("..")
    (root / "a" / "b2").symlink_to("b")
    outside = tmp_path / "outside.sh"
    outside.write_text("#!/bin/sh\n# SECRET first line\n")
    outside.chmod(0o755)
    (root / "out.sh").symlink_to(outside)
    return root


@pytest.mark.parametrize(
    "path", ["", "/abs", "a/../top.sh", "..", "./top.sh", "a//b/deep.sh", "top.sh/", "x\0y"]
)
def test_tricky_paths_are_refused_before_any_lookup(path: str) -> None:
    with pytest.raises(ScriptRefused):
        check_relative_path(path)


def test_plain_relative_paths_split_into_components() -> None:
    assert check_relative_path("a/b/deep.sh") == ["a", "b", "deep.sh"]


def test_open_script_returns_the_file_itself(tree: Path) -> None:
    fd = open_script(str(tree), "a/b/deep.sh")
    try:
        assert os.fstat(fd).st_ino == (tree / "a/b/deep.sh").stat().st_ino
        assert os.get_inheritable(fd) is False  # never leaks into anything the helper starts
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("out.sh", "symlink"),  # final component
        ("a/b2/deep.sh", "symlink"),  # intermediate component
        ("a/up/top.sh", "symlink"),  # a symlink to a parent: the classic escape
        ("top.sh/x", "symlink or non-directory"),
        ("a/b", "not a regular file"),
        ("nope.sh", "no such script"),
    ],
)
def test_open_script_refuses(tree: Path, path: str, reason: str) -> None:
    with pytest.raises(ScriptRefused, match=reason):
        open_script(str(tree), path)


def test_listing_never_follows_symlinks(tree: Path) -> None:
    listed = {s.name: s.description for s in list_scripts(str(tree))}
    assert listed == {"a/b/deep.sh": "a/b/deep.sh", "top.sh": "top.sh"}
    assert "SECRET" not in repr(listed)


@pytest.mark.parametrize(
    ("head", "description"),
    [
        (b"#!/bin/sh\n# Does things.\necho\n", "Does things."),
        (b"#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n# Real one.\n", "Real one."),
        (b"#!/bin/sh\n\n\n## Spaced.  \n", "Spaced."),
        (b"# No shebang.\n", "No shebang."),
        (b"#!/bin/sh\necho first\n# too late\n", ""),
        (b"#!/bin/sh\n", ""),
        (b"#!/bin/sh\n# caf\xc3\xa9 \xff\n", "café \ufffd"),
    ],
)
def test_description_is_the_first_comment_line(head: bytes, description: str) -> None:
    assert describe(head) == description
