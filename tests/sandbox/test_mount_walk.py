"""The component-by-component walk that opens bind sources and mount points (no root needed):
symlinks and dot components are refused, and a missing mount point is created only inside the
sandbox's own tmpfs mounts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from roboz_helper.sandbox import SandboxError
from roboz_helper.sandbox.mounts import _make_target, _open_nofollow


@pytest.fixture
def root(tmp_path: Path) -> Iterator[int]:
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / "file").write_text("x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "dir" / "link").symlink_to(tmp_path / "outside")
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _same(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.lstat(path))
    finally:
        os.close(fd)


def test_opens_an_existing_path(root: int, tmp_path: Path) -> None:
    assert _same(_open_nofollow(root, "/dir/sub"), tmp_path / "dir" / "sub")
    assert _same(_make_target(root, "/dir/file", False, set()), tmp_path / "dir" / "file")


@pytest.mark.parametrize("path", ["/dir/link", "/dir/link/anything", "/dir/../outside"])
def test_symlinks_and_dots_are_refused(root: int, tmp_path: Path, path: str) -> None:
    before = sorted(p.name for p in (tmp_path / "outside").iterdir())
    for open_path in (
        lambda: _open_nofollow(root, path),
        lambda: _make_target(root, path, True, {os.fstat(root).st_dev}),
    ):
        with pytest.raises(SandboxError, match="symlink|contains"):
            open_path()
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == before


def test_a_missing_source_is_not_created(root: int, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _open_nofollow(root, "/dir/missing")
    assert not (tmp_path / "dir" / "missing").exists()


def test_a_missing_mount_point_is_created_only_in_own_mounts(root: int, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="does not exist inside an earlier bind"):
        _make_target(root, "/dir/new/leaf", True, set())
    assert not (tmp_path / "dir" / "new").exists()
    own = {os.fstat(root).st_dev}
    assert _same(_make_target(root, "/dir/new/leaf", False, own), tmp_path / "dir/new/leaf")
    assert (tmp_path / "dir" / "new").is_dir() and (tmp_path / "dir/new/leaf").is_file()
    assert _same(_make_target(root, "/dir/made", True, own), tmp_path / "dir" / "made")
    assert (tmp_path / "dir" / "made").is_dir()
