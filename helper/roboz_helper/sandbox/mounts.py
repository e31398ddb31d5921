"""The run's root filesystem, planned: which system paths, which binds, which attributes.

pid 1 (sandbox-init) builds it from this plan in its fresh namespaces, and the fork server
builds the zygote's system template from the same layout: init_root.c says how and why each
step is done the way it is. The planning here checks every policy path once (no symlink
anywhere in it, it exists); pid 1 walks each one component by component again and refuses a
symlink that appeared in between, so what is bound is what was checked.

The script of a script run is read once here, from the descriptor the server checked, and
copied by pid 1 into /run/roboz/ on the root tmpfs, which then becomes read-only: the run
executes exactly the bytes that were checked, whatever happens to the file afterwards.
"""

from __future__ import annotations

import os
import stat
import time

from roboz_helper.file_policy import FileMatcher

from .spec import Bind, MountPlan, SandboxError, SandboxSpec, SystemLayout
from .view import plan_view

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

# The kernel's MOUNT_ATTR_* bits (linux/mount.h), as sandbox-init applies them.
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8
SYS_ATTRS = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
RW_ATTRS = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
DEV_ATTRS = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC
DEV_DIR_ATTRS = MOUNT_ATTR_RDONLY | DEV_ATTRS

_layout: tuple[float, SystemLayout] | None = None
# The tests shorten it (ROBOZ_SANDBOX_TEMPLATE_TTL_S) to see a rebuilt template's effect.
LAYOUT_TTL_S = float(os.environ.get("ROBOZ_SANDBOX_TEMPLATE_TTL_S", "30"))


def system_layout() -> SystemLayout:
    """Which system entries exist here (re-read every LAYOUT_TTL_S seconds)."""
    global _layout
    now = time.monotonic()
    if _layout is not None and now - _layout[0] < LAYOUT_TTL_S:
        return _layout[1]
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
    layout = SystemLayout(tuple(symlinks), tuple(binds))
    _layout = (now, layout)
    return layout


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
        root_size_bytes=ROOT_SIZE_BYTES,
        script_path=script_path,
        script_bytes=script_bytes,
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
