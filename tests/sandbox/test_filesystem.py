"""Attacks on the filesystem view (issue 5, item 3): each fails, and the host is unchanged."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import pytest
from roboz_helper.sandbox import SandboxError

from .conftest import RUN_UID, Sandbox


def _host_tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_secrets_and_host_files_outside_binds_unreachable(sandbox: Sandbox) -> None:
    r = sandbox.py(
        """
        import os, json
        res = {}
        for path in ("/etc/shadow", "/etc/gshadow", "/etc/ssh", "/root", "/home", "/work",
                     "/var", "/run/docker.sock", "/sys", "/sys/fs/cgroup", "/boot",
                     "/dev/sda", "/dev/mem", "/dev/kmsg", "/dev/tty", "/dev/pts", "/proc/kcore"):
            try:
                os.stat(path); res[path] = "exists"
            except OSError as e:
                res[path] = e.errno
        print(json.dumps(res))
        print(sorted(os.listdir("/dev")))
        """
    )
    res = json.loads(r.out.splitlines()[0])
    present = {p: v for p, v in res.items() if v == "exists" and p != "/proc/kcore"}
    assert not present, present
    assert json.loads(r.out.splitlines()[1].replace("'", '"')) == [
        "fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero",
    ]  # fmt: skip


def test_proc_kcore_and_sysctl_not_writable_and_host_unchanged(sandbox: Sandbox) -> None:
    before = Path("/proc/sys/vm/swappiness").read_text()
    hostname = Path("/proc/sys/kernel/hostname").read_text()
    r = sandbox.py(
        """
        import json
        res = {}
        for path, value in (("/proc/sys/vm/swappiness", "7"),
                            ("/proc/sys/kernel/hostname", "pwned"),
                            ("/proc/sysrq-trigger", "h"),
                            ("/proc/sys/kernel/core_pattern", "|/tmp/x")):
            try:
                with open(path, "w") as f:
                    f.write(value)
                res[path] = "written"
            except OSError as e:
                res[path] = e.errno
        try:
            open("/proc/kcore", "rb").read(1); res["kcore"] = "read"
        except OSError as e:
            res["kcore"] = e.errno
        print(json.dumps(res))
        """
    )
    res = json.loads(r.out)
    assert "written" not in res.values() and res["kcore"] != "read", res
    assert Path("/proc/sys/vm/swappiness").read_text() == before
    assert Path("/proc/sys/kernel/hostname").read_text() == hostname


def test_writing_outside_the_workspace_fails(sandbox: Sandbox) -> None:
    r = sandbox.py(
        """
        import os, json
        res = {}
        for path in ("/usr/roboz-pwned", "/etc/roboz-pwned", "/roboz-pwned", "/bin/roboz-pwned",
                     "/run/roboz/roboz-pwned", "/proc/roboz-pwned", "/dev/roboz-pwned",
                     "/etc/passwd"):
            try:
                with open(path, "a") as f:
                    f.write("x")
                res[path] = "written"
            except OSError as e:
                res[path] = e.errno
        print(json.dumps(res))
        """
    )
    res = json.loads(r.out)
    assert "written" not in res.values(), res
    for path in ("/usr/roboz-pwned", "/etc/roboz-pwned", "/roboz-pwned", "/usr/bin/roboz-pwned"):
        assert not os.path.exists(path)


def test_dotdot_from_the_workspace_stays_inside(sandbox: Sandbox) -> None:
    outside = sandbox.workspace.parent
    before = _host_tree(outside)
    r = sandbox.py(
        """
        import os
        print(sorted(os.listdir("..")))
        for rel in ("../escape", "../../escape", "../../../../../../escape"):
            try:
                open(rel, "w").write("x"); print("wrote", rel)
            except OSError as e:
                print("denied", e.errno)
        print(os.path.exists("../scripts"))
        """
    )
    lines = r.out.splitlines()
    assert lines[0] == "['ws']", r  # the workspace's parent is the sandbox's own skeleton
    assert all(line.startswith("denied") for line in lines[1:4]), r
    assert lines[4] == "False"
    after = _host_tree(outside)
    assert [p for p in after if "escape" in p] == []
    new = {p for p in set(after) - set(before) if not p.startswith("scripts")}
    assert new <= {f"ws/{p}" for p in os.listdir(sandbox.workspace)}


def test_symlinks_and_hardlinks_planted_in_the_workspace(sandbox: Sandbox, tmp_path: Path) -> None:
    ws = sandbox.workspace
    host_secret = tmp_path / "host-secret"
    host_secret.write_text("secret\n")
    os.chmod(host_secret, 0o600)
    (ws / "to-shadow").symlink_to("/etc/shadow")
    (ws / "to-secret").symlink_to(host_secret)
    (ws / "to-root").symlink_to("/")
    os.link(host_secret, ws / "hard-secret")  # same filesystem: a hard link by the host
    r = sandbox.py(
        """
        import os
        for name in ("to-shadow", "to-secret", "to-root/root/.bashrc", "hard-secret"):
            try:
                print(name, open(name).read().strip())
            except OSError as e:
                print(name, "denied", e.errno)
        try:
            open("to-root/etc/passwd", "a").write("pwned"); print("wrote passwd")
        except OSError as e:
            print("passwd denied", e.errno)
        # New links made by the run: to system files (other mount: EXDEV) and via symlinks.
        for src in ("/etc/passwd", "/usr/bin/id"):
            try:
                os.link(src, os.path.basename(src) + ".lnk"); print("linked", src)
            except OSError as e:
                print("link denied", e.errno)
        os.symlink("/etc/passwd", "sym-passwd")
        """
    )
    lines = r.out.splitlines()
    assert lines[0].startswith("to-shadow denied")
    assert lines[1].startswith("to-secret denied")
    assert lines[2].startswith("to-root/root/.bashrc denied")
    assert lines[3].startswith("hard-secret denied")  # the inode is root-only
    assert lines[4].startswith("passwd denied")
    assert lines[5].startswith("link denied") and lines[6].startswith("link denied")
    assert host_secret.read_text() == "secret\n"
    assert "pwned" not in Path("/etc/passwd").read_text()


def test_policy_path_through_a_planted_symlink_is_refused(sandbox: Sandbox) -> None:
    (sandbox.workspace / "sub").symlink_to("/etc")
    with pytest.raises(SandboxError, match="symlink"):
        sandbox.exec("/bin/true", writable_paths=(str(sandbox.workspace / "sub"),))
    with pytest.raises(SandboxError, match="symlink"):
        sandbox.exec("/bin/true", workdir=str(sandbox.workspace / "sub"))


def test_readonly_and_writable_paths(sandbox: Sandbox, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    rw = tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "data").write_text("data\n")
    os.chmod(rw, 0o777)
    r = sandbox.sh(
        f"cat {ro}/data; echo x > {ro}/new || echo ro-denied; echo y > {rw}/new && echo rw-ok",
        readonly_paths=(str(ro),),
        writable_paths=(str(rw),),
    )
    assert r.out.split() == ["data", "ro-denied", "rw-ok"], r
    assert not (ro / "new").exists() and (rw / "new").read_text() == "y\n"


def test_remounting_readonly_binds_writable_fails(sandbox: Sandbox) -> None:
    r = sandbox.sh(
        """
        mount -o remount,rw /usr 2>/dev/null && echo remounted
        mount -o remount,bind,rw / 2>/dev/null && echo remounted-root
        mount -t tmpfs none /usr/local 2>/dev/null && echo mounted
        touch /usr/roboz-pwned 2>/dev/null && echo touched
        umount -l /usr 2>/dev/null && echo unmounted
        echo done
        """
    )
    assert r.out.split() == ["done"], r
    assert not os.path.exists("/usr/roboz-pwned")


def test_workspace_is_nosuid_nodev_and_system_is_readonly(sandbox: Sandbox) -> None:
    r = sandbox.exec("/bin/cat", "/proc/self/mountinfo")
    mounts = {}
    for line in r.out.splitlines():
        parts = line.split()
        mounts[parts[4]] = parts[5].split(",")
    assert {"nosuid", "nodev"} <= set(mounts[str(sandbox.workspace)])
    assert "rw" in mounts[str(sandbox.workspace)]
    for path in ("/", "/usr", "/etc/passwd", "/proc/sys"):
        assert "ro" in mounts[path], (path, mounts[path])
    assert {"nosuid", "nodev"} <= set(mounts["/tmp"])
    assert "/sys" not in mounts and "/oldroot" not in mounts


def test_cgroup_files_cannot_be_written(sandbox: Sandbox) -> None:
    r = sandbox.py(
        """
        import os
        print(open("/proc/self/cgroup").read().strip().splitlines()[0])
        for path in ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                     "/sys/fs/cgroup/cgroup.procs"):
            try:
                open(path, "w").write("max"); print("written")
            except OSError as e:
                print("denied", e.errno)
        """
    )
    lines = r.out.splitlines()
    assert all(line.startswith("denied") for line in lines[1:]), r
    # The run sees its own cgroup as the root of its cgroup namespace.
    assert lines[0].endswith(":/"), lines[0]


def test_host_sysv_and_posix_shared_memory_unreachable(sandbox: Sandbox) -> None:
    # Host-wide names, so each test process has its own: parallel workers (and other suites on
    # the machine) must not remove what this one is looking for.
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x524F0000 | (os.getpid() & 0xFFFF)
    shmid = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT, world-readable
    assert shmid >= 0
    posix = Path(f"/dev/shm/roboz-test-shm-{os.getpid()}")
    posix.write_text("host secret")
    os.chmod(posix, 0o666)
    try:
        r = sandbox.py(
            f"""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            print("shmget", libc.shmget({key}, 0, 0), ctypes.get_errno())
            print("shm_open", os.path.exists({str(posix)!r}))
            print(open("/proc/sysvipc/shm").read().count("\\n"))
            """
        )
        lines = r.out.splitlines()
        assert lines[0] == "shmget -1 2", r  # ENOENT: a fresh IPC namespace
        assert lines[1] == "shm_open False"
        assert lines[2] == "1"  # only the header line
    finally:
        libc.shmctl(shmid, 0, None)  # IPC_RMID
        posix.unlink()


def test_tmp_is_size_limited(sandbox: Sandbox) -> None:
    r = sandbox.sh(
        "head -c 8M /dev/zero > /tmp/fill 2>/dev/null; echo rc=$?; stat -c %s /tmp/fill",
        tmp_size_bytes=2 << 20,
    )
    lines = r.out.split()
    assert lines[0] != "rc=0" and int(lines[1]) <= 2 << 20, r


def test_workspace_file_size_limited(sandbox: Sandbox) -> None:
    r = sandbox.py(
        """
        try:
            with open("big", "wb") as f:
                for _ in range(8):
                    f.write(b"x" * (1 << 20))
            print("wrote all")
        except OSError as e:
            print("denied", e.errno)
        """,
        max_file_bytes=1 << 20,
    )
    assert r.out.strip() == "denied 27", r  # EFBIG (Python ignores SIGXFSZ)
    assert (sandbox.workspace / "big").stat().st_size <= 1 << 20
    r = sandbox.sh("head -c 4M /dev/zero > big2", max_file_bytes=1 << 20)
    assert (sandbox.workspace / "big2").stat().st_size <= 1 << 20


def test_files_created_belong_to_the_run_uid(sandbox: Sandbox) -> None:
    sandbox.sh("echo x > owned")
    assert (sandbox.workspace / "owned").stat().st_uid == RUN_UID
