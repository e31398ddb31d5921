"""The helper <-> zygote wire: a plan and its descriptors.

A ``<u32 length>`` header carrying the run's descriptors (spec.RunFds, in that order) as
SCM_RIGHTS, then ``length`` bytes of msgpack-encoded ``ChildPlan``. Received descriptors are
close-on-exec (MSG_CMSG_CLOEXEC), so none can survive into a run by accident. The zygote
answers ``<i32 pid>`` with a pidfd of it, or ``<i32 -1>`` and a length-prefixed error text;
after every reply it sends an offer (a header, and when not empty a spec.WarmOffer).
"""

from __future__ import annotations

import array
import socket
import struct

import msgspec

from .spec import ChildPlan, WarmOffer

HEADER = struct.Struct("=I")
REPLY = struct.Struct("=i")
MAX_FDS = 16
MAX_PLAN_BYTES = 16 * 1024 * 1024
ENCODER = msgspec.msgpack.Encoder()
DECODER = msgspec.msgpack.Decoder(ChildPlan)
OFFER_DECODER = msgspec.msgpack.Decoder(WarmOffer)


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
