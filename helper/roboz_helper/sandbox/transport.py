"""The helper <-> zygote wire: a plan and its descriptors.

A ``<u32 length>`` header carrying the plan's descriptors (stdout, stderr, set-up and status
pipes, cgroup join files) as SCM_RIGHTS, then ``length`` bytes of msgspec-encoded
``ChildPlan`` without descriptor numbers (the receiver fills in the ones it got). Received
descriptors are close-on-exec (MSG_CMSG_CLOEXEC), so none can survive into a run by accident.
"""

from __future__ import annotations

import array
import dataclasses
import socket
import struct

import msgspec

from . import child

HEADER = struct.Struct("=I")
REPLY = struct.Struct("=i")
MAX_FDS = 16
MAX_PLAN_BYTES = 16 * 1024 * 1024
ENCODER = msgspec.msgpack.Encoder()
DECODER = msgspec.msgpack.Decoder(child.ChildPlan)


def with_fds(plan: child.ChildPlan, fds: list[int]) -> child.ChildPlan:
    if not fds and plan.prepare_only:
        return plan
    return dataclasses.replace(
        plan,
        stdout_w=fds[0],
        stderr_w=fds[1],
        setup_w=fds[2],
        status_w=fds[3],
        cgroup_procs_fds=tuple(fds[4:]),
    )


def encode_plan(plan: child.ChildPlan) -> bytes:
    """The plan without its descriptor numbers (those travel as SCM_RIGHTS)."""
    blank = dataclasses.replace(
        plan, stdout_w=-1, stderr_w=-1, setup_w=-1, status_w=-1, cgroup_procs_fds=()
    )
    return ENCODER.encode(blank)


def shape_key(plan: child.ChildPlan) -> bytes:
    """Everything a warm pid 1 has already acted on; runs differing only in argv, env,
    script, limits enforced later (rlimits, cgroup, deadline, output) share a shape. Which
    build of the system template its root was cloned from is checked apart (a warm sandbox
    expires with its build)."""
    mounts_shape = dataclasses.replace(
        plan.mounts, script_path=None, script_bytes=None, template=None, view=()
    )
    return ENCODER.encode((mounts_shape, plan.uid, plan.gid, plan.network, plan.rootless))


def fds_of(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            arr = array.array("i")
            arr.frombytes(payload[: len(payload) - (len(payload) % arr.itemsize)])
            fds.extend(arr)
    return fds


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)
