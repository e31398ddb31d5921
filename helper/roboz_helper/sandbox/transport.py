"""The helper <-> zygote <-> warm pid 1 wire: a plan and its descriptors.

A ``<u32 length>`` header carrying the plan's descriptors (stdout, stderr, set-up and status
pipes, cgroup.procs files) as SCM_RIGHTS, then ``length`` bytes of msgspec-encoded
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


def send_plan(sock: socket.socket, plan: child.ChildPlan) -> None:
    """Blocking: header with the plan's descriptors attached, then the body."""
    body = encode_plan(plan)
    fds = array.array("i", child.plan_fds(plan))
    sock.sendmsg([HEADER.pack(len(body))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    sock.sendall(body)


def receive_plan(fd: int) -> child.ChildPlan:
    """Blocking counterpart of ``send_plan`` on a raw descriptor (used by a warm pid 1)."""
    sock = socket.socket(fileno=fd)
    try:
        data, ancdata, _, _ = sock.recvmsg(
            HEADER.size, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
        )
        fds = fds_of(ancdata)
        if not data:
            raise EOFError
        if len(data) < HEADER.size:
            data += recv_exactly(sock, HEADER.size - len(data))
        (length,) = HEADER.unpack(data)
        if length > MAX_PLAN_BYTES:
            raise ValueError("plan too large")
        return with_fds(DECODER.decode(recv_exactly(sock, length)), fds)
    finally:
        sock.detach()


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
