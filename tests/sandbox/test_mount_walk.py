"""The component-by-component walk that opens bind sources and mount points (no root needed),
sandbox-init's own (walk in init_root.c, through c_driver.c): symlinks and dot components are
refused, and a missing mount point is created only inside the sandbox's own tmpfs mounts."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .c_driver import Answer, Driver


@pytest.fixture
def root(tmp_path: Path) -> Iterator[int]:
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "dir" / "file").write_text("x")
    (tmp_path / "outside").mkdir()
    (tmp_path / "dir" / "link").symlink_to(tmp_path / "outside")
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _open_source(driver: Driver, root: int, path: str) -> Answer:
    return driver("walk", root, path, pass_fds=(root,))


def _mount_point(driver: Driver, root: int, path: str, is_dir: bool, own: set[int]) -> Answer:
    return driver("target", root, path, int(is_dir), *sorted(own), pass_fds=(root,))


def _same(answer: Answer, path: Path) -> bool:
    assert answer.ok, answer
    st = os.lstat(path)
    return (int(answer.fields[0]), int(answer.fields[1])) == (st.st_dev, st.st_ino)


def test_opens_an_existing_path(c_driver: Driver, root: int, tmp_path: Path) -> None:
    assert _same(_open_source(c_driver, root, "/dir/sub"), tmp_path / "dir" / "sub")
    found = _mount_point(c_driver, root, "/dir/file", False, set())
    assert _same(found, tmp_path / "dir" / "file")


@pytest.mark.parametrize("path", ["/dir/link", "/dir/link/anything", "/dir/../outside"])
def test_symlinks_and_dots_are_refused(
    c_driver: Driver, root: int, tmp_path: Path, path: str
) -> None:
    before = sorted(p.name for p in (tmp_path / "outside").iterdir())
    for answer in (
        _open_source(c_driver, root, path),
        _mount_point(c_driver, root, path, True, {os.fstat(root).st_dev}),
    ):
        assert not answer.ok and answer.errno == 0, answer
        assert "symlink" in answer.text or "contains" in answer.text, answer
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == before


def test_a_missing_source_is_not_created(c_driver: Driver, root: int, tmp_path: Path) -> None:
    answer = _open_source(c_driver, root, "/dir/missing")
    assert not answer.ok and answer.errno == errno.ENOENT, answer
    assert not (tmp_path / "dir" / "missing").exists()


def test_a_missing_mount_point_is_created_only_in_own_mounts(
    c_driver: Driver, root: int, tmp_path: Path
) -> None:
    refused = _mount_point(c_driver, root, "/dir/new/leaf", True, set())
    assert not refused.ok and "does not exist inside an earlier bind" in refused.text, refused
    assert not (tmp_path / "dir" / "new").exists()
    own = {os.fstat(root).st_dev}
    made = _mount_point(c_driver, root, "/dir/new/leaf", False, own)
    assert _same(made, tmp_path / "dir/new/leaf")
    assert (tmp_path / "dir" / "new").is_dir() and (tmp_path / "dir/new/leaf").is_file()
    assert _same(_mount_point(c_driver, root, "/dir/made", True, own), tmp_path / "dir" / "made")
    assert (tmp_path / "dir" / "made").is_dir()
