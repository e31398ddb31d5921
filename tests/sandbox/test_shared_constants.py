"""What sandbox-init (C) and the helper (Python) must agree on, read from both sides: the
descriptor numbers and exit status of a starting pid 1, the fork server's messages, the
file view's kinds, the mount attributes, the paths the root reserves, the status report,
and the layout of the configuration and the request, decoded from Python's encoding in the
order the C parser reads it (read_config and receive in init.c). No root needed."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import pytest
from roboz_helper.sandbox import init_wire, mounts, namespaces, seccomp, view
from roboz_helper.sandbox.spec import Bind, ChildPlan, MountPlan, ViewEntry

SOURCES = init_wire.BINARY.parent
C = {name: (SOURCES / name).read_text() for name in ("init.h", "init.c", "init_root.c",
                                                    "fork_server.c")}  # fmt: skip


def define(name: str) -> str:
    """The value of ``#define name value`` (one definition across the sources)."""
    found = {
        m.group(1).strip()
        for text in C.values()
        for m in re.finditer(rf"^#define {re.escape(name)}\s+(.+?)\s*(?:/\*.*)?$", text, re.M)
    }
    assert len(found) == 1, (name, found)
    return found.pop()


def number(name: str) -> int:
    value = define(name)
    if re.fullmatch(r"'.'", value):
        return ord(value[1])
    return int(value, 0)


@pytest.mark.parametrize(
    ("c_name", "python"),
    [
        ("CTRL_FD", init_wire.CTRL_FD),
        ("CONFIG_FD", init_wire.CONFIG_FD),
        ("ALIVE_FD", init_wire.ALIVE_FD),
        ("REPORT_FD", init_wire.REPORT_FD),
        ("POOL_FD", init_wire.POOL_FD),
        ("PROXY_FD", init_wire.PROXY_FD),
        ("PROXY_PORT", init_wire.PROXY_PORT),
        ("NETWORK_NONE", init_wire.NETWORK_CODES["none"]),
        ("NETWORK_LOOPBACK", init_wire.NETWORK_CODES["loopback"]),
        ("NETWORK_PROXY", init_wire.NETWORK_CODES["proxy"]),
        ("EXIT_SETUP_FAILED", init_wire.EXIT_SETUP_FAILED),
        ("MAX_POOL", init_wire.MAX_POOL),
        ("TEMPLATE_REQUEST", init_wire.TEMPLATE_REQUEST),
        ("VIEW_MASK", view.MASK),
        ("VIEW_READ_ONLY", view.READ_ONLY),
        ("VIEW_WRITABLE", view.WRITABLE),
        ("VIEW_SKELETON", view.SKELETON),
        ("VIEW_SKELETON_CHILD", view.SKELETON_CHILD),
        ("MOUNT_ATTR_RDONLY", mounts.MOUNT_ATTR_RDONLY),
        ("MOUNT_ATTR_NOSUID", mounts.MOUNT_ATTR_NOSUID),
        ("MOUNT_ATTR_NODEV", mounts.MOUNT_ATTR_NODEV),
        ("MOUNT_ATTR_NOEXEC", mounts.MOUNT_ATTR_NOEXEC),
    ],
)
def test_numbers(c_name: str, python: int) -> None:
    assert number(c_name) == python


def test_strings_and_sizes() -> None:
    assert define("CONFIG_MAGIC") == f'"{init_wire.CONFIG_MAGIC.decode()}"'
    assert define("OLDROOT") == f'"{mounts.OLDROOT}"'
    for mask in ("MASK_DIR", "MASK_FILE"):  # the view's masks live in the script's directory
        assert define(mask).startswith(f'"{mounts.SCRIPT_DIR}/'), define(mask)
    # The status report: i32 wait status, i64 CPU microseconds, i64 peak RSS.
    report = re.search(r"uint8_t out\[(\d+)\];((?:\s*memcpy\(out[^;]*;)+)", C["init.c"])
    assert report is not None
    sizes = [int(s) for s in re.findall(r"memcpy\(out(?: \+ \d+)?, &\w+, (\d+)\)", report[2])]
    assert sizes == [4, 8, 8] and int(report[1]) == struct.calcsize(init_wire.STATUS_FORMAT)
    assert struct.calcsize(init_wire.STATUS_FORMAT) == sum(sizes)
    # In direct mode the starter writes pid 1's pid first.
    assert "int32_t reported = pid;" in C["fork_server.c"]
    assert struct.calcsize(init_wire.PID_FORMAT) == 4
    # The fork server's request head: two bytes.
    assert re.search(r"uint8_t head\[2\];", C["fork_server.c"])
    assert init_wire._SPAWN.size == 2
    # The namespaces pid 1 makes for itself, and its hostname's source.
    assert "unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)" in C["init_root.c"]
    assert namespaces.INIT_NAMESPACES == (
        namespaces.CLONE_NEWNS | namespaces.CLONE_NEWNET | namespaces.CLONE_NEWIPC
        | namespaces.CLONE_NEWUTS
    )  # fmt: skip


# ------------------------------------------------------------------ the layouts ----------


@dataclass
class Group:
    kind: str  # "body", "repeat" (count: a name read before), "optional" (if bytes remain)
    count: str = ""
    ops: list[tuple[str, ...]] = field(default_factory=list)


_TAKES = {"take_str": "str", "take_strs": "strs", "take_counted_strs": "strs",
          "take_links": "links", "take_binds": "binds", "take_bytes": "bytes"}  # fmt: skip


def reads(function: str) -> Group:
    """The order in which a C parser of init.c reads its input: the cursor's calls, the loops
    over a count read before, the parts read only when bytes remain."""
    body = C["init.c"].split(function, 1)[1].split("\n}\n", 1)[0]
    body = body.split("struct cursor c = {", 1)[1].split("\n", 1)[1]
    stack = [Group("body")]
    for line in body.splitlines():
        line = line.strip()
        if m := re.match(r"for \(uint32_t i = 0; i < (\S+?)(?: &&|;)", line):
            stack.append(Group("repeat", _name(m[1])))
        elif re.match(r"if \((?:c\.ok && )?c\.left\) \{", line):
            stack.append(Group("optional"))
        elif line.startswith("}") and len(stack) > 1:
            done = stack.pop()
            stack[-1].ops.append(("group", done))
        elif m := re.match(r"(?:uint32_t )?(?:(\S+) = )?(?:\(\w+\))?take\(&c, (\d)\);", line):
            stack[-1].ops.append(("int", m[2], _name(m[1] or "_")))
        elif m := re.match(r"(\S+) = (take_\w+)\(&c", line):
            stack[-1].ops.append((_TAKES[m[2]], _name(m[1])))
        elif m := re.match(r"c\.p \+= \(size_t\)(\w+) \* (\d+);", line):
            stack[-1].ops.append(("skip", _name(m[1]), m[2]))
    assert len(stack) == 1, function
    return stack[0]


def _name(c_name: str) -> str:
    return re.sub(r"^(?:cfg\.root\.|cfg\.|r->|req->)", "", c_name).replace("[i]", "[]")


class Decoder:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0
        self.values: dict[str, list[object]] = {}

    def take(self, n: int) -> bytes:
        assert self.at + n <= len(self.data), "read past the end"
        self.at += n
        return self.data[self.at - n : self.at]

    def u(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def blob(self) -> bytes:
        return self.take(self.u(4))

    def run(self, group: Group) -> None:
        for op in group.ops:
            kind = op[0]
            if kind == "group":
                inner: Group = op[1]
                if inner.kind == "optional":
                    if self.at < len(self.data):
                        self.run(inner)
                else:
                    for _ in range(int(self.values[inner.count][-1])):
                        self.run(inner)
                continue
            value: object
            if kind == "int":
                value = self.u(int(op[1]))
            elif kind == "skip":
                value = self.take(int(self.values[op[1]][-1]) * int(op[2]))
            elif kind in ("str", "bytes"):
                value = self.blob()
            elif kind == "strs":
                value = [self.blob().decode() for _ in range(self.u(4))]
            elif kind == "links":
                value = [(self.blob().decode(), self.blob().decode()) for _ in range(self.u(4))]
            else:  # binds
                value = [(self.blob().decode(), self.u(4)) for _ in range(self.u(4))]
            self.values.setdefault(op[-1], []).append(value)

    def one(self, name: str) -> object:
        (value,) = self.values[name]
        return value


def _plan() -> ChildPlan:
    mplan = MountPlan(
        symlinks=(("/bin", "usr/bin"), ("/etc/localtime", "/usr/share/zoneinfo/UTC")),
        system=(Bind("/usr", mounts.SYS_ATTRS), Bind("/etc/passwd", mounts.SYS_ATTRS)),
        binds=(Bind("/srv/data", mounts.SYS_ATTRS), Bind("/srv/work", mounts.RW_ATTRS)),
        workdir="/srv/work",
        tmp_size_bytes=8 << 20,
        tmp_inodes=2048,
        root_size_bytes=mounts.ROOT_SIZE_BYTES,
        script_path="/run/roboz/job.sh",
        script_bytes=b"#!/bin/sh\necho hi\n",
        view=(
            ViewEntry(view.MASK, b"/srv/work/.env", 7, 8),
            ViewEntry(view.READ_ONLY, b"/srv/work/docs", 9, 10),
        ),
    )
    return ChildPlan(
        rootless=False, uid=1234, gid=5678, network="loopback", mounts=mplan,
        rlimits=((7, 256, 256), (1, 10, -1)), exec_path="/bin/sh",
        exec_argv=("/bin/sh", "/run/roboz/job.sh", "a b"), env={"PATH": "/usr/bin", "X": "1"},
    )  # fmt: skip


def test_the_configuration_layout() -> None:
    plan = _plan()
    data = init_wire.encode_config(plan, prepare_run=True, report=False, pool=3)
    decoder = Decoder(data)
    decoder.run(reads("static int read_config("))
    assert decoder.at == len(data), "the C parser leaves bytes unread"
    assert data[:4] == init_wire.CONFIG_MAGIC
    m = plan.mounts
    expected = {
        "uid": 1234, "gid": 5678, "rootless": 0, "prepare_run": 1, "report": 0,
        "network": 1, "npool": 3, "workdir": b"/srv/work", "n": seccomp.INSTRUCTIONS,
        "hostname": namespaces.HOSTNAME.encode(), "root_size": m.root_size_bytes,
        "tmp_size": m.tmp_size_bytes, "tmp_inodes": m.tmp_inodes,
        "sys_attrs": mounts.SYS_ATTRS, "dev_attrs": mounts.DEV_ATTRS,
        "dev_dir_attrs": mounts.DEV_DIR_ATTRS, "symlinks": list(m.symlinks),
        "system": [(b.path, b.attrs) for b in m.system],
        "binds": [(b.path, b.attrs) for b in m.binds], "devices": list(mounts.DEVICES),
        "dev_links": list(mounts.DEV_LINKS), "proc_ro": list(mounts.PROC_READONLY),
    }  # fmt: skip
    assert {name: decoder.one(name) for name in expected} == expected
    assert decoder.one("_") == int.from_bytes(init_wire.CONFIG_MAGIC, "little")


def test_the_request_layout() -> None:
    plan = _plan()
    data = init_wire.encode_request(plan)
    decoder = Decoder(data)
    decoder.run(reads("static int receive("))
    assert decoder.at == len(data), "the C parser leaves bytes unread"
    mask = (1 << 64) - 1
    assert decoder.one("in_cgroup") == 0 and decoder.one("nlimits") == 2
    assert list(zip(decoder.values["limits[].res"], decoder.values["limits[].soft"],
                    decoder.values["limits[].hard"], strict=True)) == [
        (res, soft & mask, hard & mask) for res, soft, hard in plan.rlimits
    ]  # fmt: skip
    assert decoder.one("exec_path") == b"/bin/sh"
    assert decoder.one("argv") == list(plan.exec_argv)
    assert decoder.one("envp") == ["PATH=/usr/bin", "X=1"]
    assert decoder.one("script_path") == b"/run/roboz/job.sh"
    assert decoder.one("script") == plan.mounts.script_bytes
    assert decoder.one("nview") == 2
    entries = zip(*(decoder.values[f"view[].{k}"] for k in ("kind", "path", "dev", "ino")),
                  strict=True)  # fmt: skip
    assert [ViewEntry(k, p, d, i) for k, p, d, i in entries] == list(plan.mounts.view)


def test_the_template_configuration_carries_the_layout() -> None:
    layout = mounts.system_layout()
    decoder = Decoder(data := init_wire.encode_template(layout))
    decoder.run(reads("static int read_config("))
    assert decoder.at == len(data)
    assert decoder.one("symlinks") == list(layout.symlinks)
    assert decoder.one("system") == [(b.path, b.attrs) for b in layout.binds]
    assert decoder.one("binds") == [] and decoder.one("uid") == 0


def test_the_proxys_descriptor_is_above_every_pool_join_file() -> None:
    # pid 1 keeps the proxy's listener at PROXY_FD; the pooled cgroup's join files are
    # POOL_FD .. POOL_FD + MAX_POOL - 1 when it makes it.
    assert init_wire.PROXY_FD >= init_wire.POOL_FD + init_wire.MAX_POOL
    from roboz_helper.egress import endpoint

    assert (endpoint.PROXY_HOST, endpoint.PROXY_PORT) == ("127.0.0.1", init_wire.PROXY_PORT)
