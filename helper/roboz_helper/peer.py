"""Who is on the other end of a Unix socket, as the kernel reports it (not as the peer claims)."""

from __future__ import annotations

import array
import errno
import socket
import struct
from dataclasses import dataclass

# Linux asm-generic value; the socket module does not export it on every Python version.
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_UCRED = struct.Struct("3i")


@dataclass(frozen=True)
class PeerCredentials:
    pid: int
    uid: int
    gid: int
    groups: tuple[int, ...]


def _peer_groups(sock: socket.socket) -> tuple[int, ...]:
    """Supplementary groups of the peer at connect() time (SO_PEERGROUPS, Linux >= 4.13)."""
    size = 64 * 4
    while True:
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, size)
        except OSError as exc:
            # ERANGE: the buffer was too small; the kernel would tell us the size, but Python
            # does not pass it back, so grow until it fits (NGROUPS_MAX is 65536).
            if exc.errno == errno.ERANGE and size < 65536 * 4:
                size *= 4
                continue
            if exc.errno in (errno.ENOPROTOOPT, errno.EINVAL):
                return ()
            raise
        groups = array.array("I")
        groups.frombytes(raw[: len(raw) - len(raw) % groups.itemsize])
        return tuple(groups)


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid=pid, uid=uid, gid=gid, groups=_peer_groups(sock))
