"""The sandbox's filesystem: a tmpfs root built from explicit, resolved-once binds.

Plan in the parent (pure data, may allocate freely); pid 1 (sandbox-init, ``build_root`` in
init_root.c) executes it in its fresh mount and pid namespaces. The walking and binding
functions here are the same procedure in Python, used for the zygote's system template
(``build_template``):

1. Make every mount private (nothing propagates back to the host).
2. Mount a small tmpfs and ``pivot_root`` into it; the old root stays reachable at ``/oldroot``
   only until step 6 (the same scheme as bubblewrap).
3. Bind each source from ``/oldroot``. Sources are opened component by component with
   ``O_PATH|O_NOFOLLOW`` (a symlink anywhere in a source path is an error, so a path is resolved
   exactly once and cannot be redirected between the check and the mount), cloned with
   ``open_tree(OPEN_TREE_CLONE|AT_RECURSIVE)``, given their attributes with ``mount_setattr``
   while still detached (a read-only bind is never writable, not even for a moment, and the
   attribute applies to every submount, unlike ``MS_REMOUNT``), then attached with
   ``move_mount`` onto a target opened the same way. Mount points are created only inside the
   sandbox's own tmpfs mounts, never inside a bound host directory.
4. System directories (/usr, /etc pieces, /bin, /lib*...) are read-only, nosuid, nodev; the
   workdir and writable paths are read-write, nosuid, nodev; symlinked top-level directories
   (/bin -> usr/bin) are recreated as symlinks.
5. /tmp is a size- and inode-limited tmpfs; /dev a tiny read-only tmpfs with null, zero, full,
   random and urandom bound in (no tty, no pts, no shm of the host: /dev/shm points into the
   private /tmp); /proc a fresh procfs of the run's pid namespace with /proc/sys and other
   kernel knobs bound read-only over themselves; /sys is absent.
6. The old root is detached and the tmpfs root remounted read-only.

The script of a script run is copied (from the descriptor the server checked, read once in the
parent) into /run/roboz/ on the root tmpfs, which then becomes read-only (``finish_root`` in
init.c): the run executes
exactly the bytes that were checked, whatever happens to the file afterwards.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from roboz_helper.file_policy import FileMatcher

from . import syscalls as sc
from .spec import SandboxError, SandboxSpec
from .view import ViewEntry, plan_view

OLDROOT = "/oldroot"
SCRIPT_DIR = "/run/roboz"
MAX_SCRIPT_BYTES = 4 * 1024 * 1024
# The root skeleton's tmpfs (mount points, symlinks, the script copy); read-only once built.
ROOT_SIZE_BYTES = 1024 * 1024 + MAX_SCRIPT_BYTES

# Top-level system entries shared read-only (symlinks are recreated, directories bound).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The pieces of /etc that programs need; nothing with secrets (shadow, ssh host keys, sudoers).
ETC_ENTRIES = (
    "alternatives", "bash.bashrc", "ca-certificates", "debian_version", "gai.conf", "group",
    "host.conf", "hosts", "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "locale.alias", "localtime", "mime.types", "nsswitch.conf", "os-release", "passwd",
    "profile", "protocols", "python3", "python3.11", "services", "ssl", "terminfo", "timezone",
)  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom")
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("shm", "/tmp"),
)
# Kernel knobs under the fresh /proc that stay read-only even for a (hypothetical) root inside.
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "latency_stats", "acpi")

SYS_ATTRS = sc.MOUNT_ATTR_RDONLY | sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV
RW_ATTRS = sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NODEV
DEV_ATTRS = sc.MOUNT_ATTR_NOSUID | sc.MOUNT_ATTR_NOEXEC
DEV_DIR_ATTRS = sc.MOUNT_ATTR_RDONLY | DEV_ATTRS


@dataclass(frozen=True)
class Bind:
    path: str  # same path on the host and in the sandbox
    attrs: int  # MOUNT_ATTR_* set on the clone (always applied recursively)


@dataclass(frozen=True)
class MountPlan:
    symlinks: tuple[tuple[str, str], ...]  # (path, target) of the system layout
    system: tuple[Bind, ...]  # system binds (replaced by the template when there is one)
    binds: tuple[Bind, ...]  # policy binds and the workdir, parents before children
    workdir: str
    tmp_size_bytes: int
    tmp_inodes: int
    script_path: str | None
    script_bytes: bytes | None
    root_size_bytes: int
    template: str | None = None  # set by the zygote: where its prepared system tree lives
    # The file view, applied per request (so not part of a warm pid 1's shape): view.py.
    view: tuple[ViewEntry, ...] = ()


@dataclass(frozen=True)
class SystemLayout:
    symlinks: tuple[tuple[str, str], ...]
    binds: tuple[Bind, ...]
    taken_at: float


_layout: SystemLayout | None = None
# The tests shorten it (ROBOZ_SANDBOX_TEMPLATE_TTL_S) to see a rebuilt template's effect.
LAYOUT_TTL_S = float(os.environ.get("ROBOZ_SANDBOX_TEMPLATE_TTL_S", "30"))


def system_layout() -> SystemLayout:
    """Which system entries exist here (re-read every LAYOUT_TTL_S seconds)."""
    global _layout
    now = time.monotonic()
    if _layout is not None and now - _layout.taken_at < LAYOUT_TTL_S:
        return _layout
    symlinks: list[tuple[str, str]] = []
    binds: list[Bind] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            symlinks.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            binds.append(Bind(path, SYS_ATTRS))
    for name in ETC_ENTRIES:
        path = f"/etc/{name}"
        if os.path.islink(path):
            symlinks.append((path, os.readlink(path)))
        elif os.path.exists(path):
            binds.append(Bind(path, SYS_ATTRS))
    _layout = SystemLayout(tuple(symlinks), tuple(binds), now)
    return _layout


def _resolved(path: str, field: str) -> str:
    """A policy path must name itself: no symlink anywhere in it (a symlink planted in a
    writable area must not redirect a bind), and it must exist."""
    normal = os.path.normpath(path)
    real = os.path.realpath(normal)
    if real != normal:
        raise SandboxError(f"{field}: {path!r} goes through a symlink (to {real!r}); "
                           "policy paths must be symlink-free")  # fmt: skip
    if not os.path.exists(real):
        raise SandboxError(f"{field}: {path!r} does not exist")
    return real


def plan_mounts(spec: SandboxSpec, script_bytes: bytes | None) -> MountPlan:
    layout = system_layout()
    binds: dict[str, Bind] = {}
    # Policy paths: checked here; the child opens them component by component and refuses any
    # symlink that appears in between, so what is bound is what was checked.
    for path in spec.readonly_paths:
        real = _resolved(path, "readonly_paths")
        binds[real] = Bind(real, SYS_ATTRS)
    for path in spec.writable_paths:
        real = _resolved(path, "writable_paths")
        binds[real] = Bind(real, RW_ATTRS)
    workdir = _resolved(spec.workdir, "workdir")
    if not os.path.isdir(workdir):
        raise SandboxError(f"workdir: {spec.workdir!r} is not a directory")
    binds[workdir] = Bind(workdir, RW_ATTRS)
    for reserved in ("/proc", "/dev", "/sys", OLDROOT, "/run/roboz"):
        for path in binds:
            if path == reserved or path.startswith(reserved + "/"):
                raise SandboxError(f"cannot bind {path!r}: {reserved} is managed by the sandbox")
    script_path = None
    if script_bytes is not None:
        name = os.path.basename(spec.argv[0]).lstrip(".") or "script"
        script_path = f"{SCRIPT_DIR}/{name}"
    ordered = tuple(sorted(binds.values(), key=lambda b: (b.path.count("/"), b.path)))
    matchers = [FileMatcher.of(policy) for policy in spec.file_policies]
    view = plan_view(matchers, [(b.path, b.attrs == RW_ATTRS) for b in ordered], workdir)
    return MountPlan(
        symlinks=layout.symlinks,
        system=layout.binds,
        binds=ordered,
        workdir=workdir,
        tmp_size_bytes=spec.tmp_size_bytes,
        tmp_inodes=max(1024, min(65536, spec.tmp_size_bytes // 4096)),
        script_path=script_path,
        script_bytes=script_bytes,
        root_size_bytes=ROOT_SIZE_BYTES,
        view=view,
    )


def read_script(fd: int) -> bytes:
    """Read the checked script once, from its descriptor (never from its path)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise SandboxError("script_fd does not refer to a regular file")
    if st.st_size > MAX_SCRIPT_BYTES:
        raise SandboxError(f"script is larger than {MAX_SCRIPT_BYTES} bytes")
    chunks = []
    offset = 0
    while True:
        chunk = os.pread(fd, 65536, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        if offset > MAX_SCRIPT_BYTES:
            raise SandboxError(f"script is larger than {MAX_SCRIPT_BYTES} bytes")
    return b"".join(chunks)


# ---------------------------------------------------------------- child side (after fork) ---

_O_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def _walk(
    root_fd: int,
    path: str,
    refused: str,
    missing: Callable[[int, str, bool], None] | None = None,
) -> int:
    """Open ``path`` (absolute) under ``root_fd`` with O_PATH one component at a time, refusing
    ``.``/``..`` and symlinks anywhere (``refused`` names what a symlink would have been used
    for). ``missing(dir_fd, name, is_last)`` creates a component that is not there; without
    it a missing component raises FileNotFoundError."""
    fd = os.dup(root_fd)
    try:
        parts = [p for p in path.split("/") if p]
        for i, part in enumerate(parts):
            if part in (".", ".."):
                raise SandboxError(f"path {path!r} contains {part!r}")
            try:
                nfd = os.open(part, _O_PATH, dir_fd=fd)
            except FileNotFoundError:
                if missing is None:
                    raise
                missing(fd, part, i == len(parts) - 1)
                nfd = os.open(part, _O_PATH, dir_fd=fd)
            os.close(fd)
            fd = nfd
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise SandboxError(f"refusing to {refused} a symlink at {path!r}")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_nofollow(root_fd: int, path: str) -> int:
    """Open ``path`` (absolute) under ``root_fd`` with O_PATH, refusing symlinks anywhere."""
    return _walk(root_fd, path, "follow")


def _make_target(root_fd: int, path: str, is_dir: bool, own_devs: set[int]) -> int:
    """Open (creating it if needed, only inside our own tmpfs mounts) the mount point."""

    def create(dir_fd: int, name: str, last: bool) -> None:
        if os.fstat(dir_fd).st_dev not in own_devs:
            raise SandboxError(
                f"mount point {path!r} does not exist inside an earlier bind"
            ) from None  # raised while the FileNotFoundError is handled
        if last and not is_dir:
            os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o444, dir_fd=dir_fd))
        else:
            os.mkdir(name, 0o755, dir_fd=dir_fd)

    return _walk(root_fd, path, "mount over", create)


def _bind(
    src_root_fd: int,
    dst_root_fd: int,
    src: str,
    dst: str,
    attrs: int,
    devs: set[int],
    recursive: bool = True,
) -> None:
    src_fd = _open_nofollow(src_root_fd, src)
    try:
        is_dir = stat.S_ISDIR(os.fstat(src_fd).st_mode)
        tree = sc.open_tree(
            src_fd,
            "",
            sc.OPEN_TREE_CLONE | sc.OPEN_TREE_CLOEXEC | sc.AT_EMPTY_PATH | sc.AT_RECURSIVE,
        )
    finally:
        os.close(src_fd)
    try:
        rec = sc.AT_RECURSIVE if recursive else 0
        sc.mount_setattr(tree, "", sc.AT_EMPTY_PATH | rec, attrs)
        dst_fd = _make_target(dst_root_fd, dst, is_dir, devs)
        try:
            sc.move_mount(
                tree, "", dst_fd, "", sc.MOVE_MOUNT_F_EMPTY_PATH | sc.MOVE_MOUNT_T_EMPTY_PATH
            )
        finally:
            os.close(dst_fd)
    finally:
        os.close(tree)


def _symlink(root_fd: int, path: str, target: str, devs: set[int]) -> None:
    parent, name = os.path.split(path)
    pfd = _make_target(root_fd, parent, True, devs)
    try:
        os.symlink(target, name, dir_fd=pfd)
    finally:
        os.close(pfd)


def _build_dev(old_fd: int, root_fd: int, devs: set[int], where: str) -> None:
    """A tiny tmpfs at ``where`` with the five harmless devices bound in and the usual links."""
    os.mkdir(where, 0o755)
    sc.mount("tmpfs", where, "tmpfs", sc.MS_NOSUID | sc.MS_NOEXEC, "mode=0755,size=64k")
    devs.add(os.stat(where).st_dev)
    for name in DEVICES:
        _bind(old_fd, root_fd, f"/dev/{name}", f"{where}/{name}", DEV_ATTRS, devs)
    for name, target in DEV_LINKS:
        os.symlink(target, f"{where}/{name}")


def build_template(where: str) -> None:
    """In the zygote's own mount namespace: the system part of every run's root, prepared once
    (and refreshed every LAYOUT_TTL_S seconds) at ``where``, read-only: usr/ (and other real
    system directories), etc/ with only the allowed entries, dev/ with its devices."""
    layout = system_layout()
    sc.mount("tmpfs", where, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=0755,size=64k")
    root_fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    t_fd = os.open(where, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    devs = {os.fstat(t_fd).st_dev}
    try:
        os.mkdir(f"{where}/etc", 0o755)
        for bind in layout.binds:
            _bind(root_fd, t_fd, bind.path, bind.path, bind.attrs, devs)
        for path, target in layout.symlinks:
            if path.count("/") > 1:
                _symlink(t_fd, path, target, devs)
        _build_dev(root_fd, root_fd, devs, f"{where}/dev")
        sc.mount_setattr(-100, f"{where}/dev", 0, DEV_DIR_ATTRS)
    finally:
        os.close(root_fd)
        os.close(t_fd)
    sc.mount_setattr(-100, where, 0, SYS_ATTRS)
