"""systemd integration without libsystemd: socket activation and readiness notification."""

from __future__ import annotations

import os
import socket

from roboz_helper.log_format import MAX_VALUE_CHARS, escape_unprintable

_SD_LISTEN_FDS_START = 3

_notify_address: str | None = None


def take_listen_fds() -> list[int]:
    """File descriptors passed by socket activation, if they are meant for this process.

    The variables are removed so that nothing started later believes it was activated.
    """
    pid = os.environ.pop("LISTEN_PID", None)
    count = os.environ.pop("LISTEN_FDS", None)
    os.environ.pop("LISTEN_FDNAMES", None)
    if pid is None or count is None or pid != str(os.getpid()):
        return []
    try:
        n = int(count)
    except ValueError:
        return []
    fds = list(range(_SD_LISTEN_FDS_START, _SD_LISTEN_FDS_START + max(n, 0)))
    for fd in fds:
        # Never leak the listening socket into a sandboxed run.
        os.set_inheritable(fd, False)
    return fds


def take_notify_socket() -> None:
    """Remember NOTIFY_SOCKET and drop it from the environment (runs must not see it)."""
    global _notify_address
    address = os.environ.pop("NOTIFY_SOCKET", None)
    if address:
        _notify_address = address


def notify(state: str) -> bool:
    """Send a state string such as "READY=1" to the service manager; False if none listens."""
    address = _notify_address
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace socket
    elif not address.startswith("/"):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True


def status_update(text: str) -> str:
    """The STATUS= assignment (what `systemctl status` shows) for text, made one printable
    line: a newline in it (an error quoting a policy file) would start an assignment of its own."""
    line = escape_unprintable(text)
    if len(line) > MAX_VALUE_CHARS:
        line = line[:MAX_VALUE_CHARS] + "..."
    return f"STATUS={line}"
