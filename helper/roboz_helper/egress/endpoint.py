"""The proxy's door into a run: a listening socket on 127.0.0.1:3128 *inside* the run's own
network namespace, served by the helper outside it.

A socket belongs to the network namespace it was created in, whoever holds it later. The
run's pid 1 (sandbox-init, ``network = proxy``) brings ``lo`` up, binds and listens on
127.0.0.1:3128 before the run process exists (so the run can never take the port first) and
keeps the socket at a fixed descriptor; the helper takes a copy of it with pidfd_getfd(2)
and accepts on it from its event loop. Connections made before that wait in the backlog.
The run's namespace keeps only ``lo``: no other interface, no route off the loopback
network, no resolver. A program that honours the proxy variables reaches the proxy; one that
ignores them finds no route (ENETUNREACH) and fails closed.

Why not a veth pair into the host (or a helper namespace): its host end is an address of the
host that the run could reach on every port the host listens on, unless firewall rules close
them again; it needs addresses and routes per run (netlink) and takes milliseconds to create
and destroy. Why not a forwarder process in the sandbox bridging the loopback port to a Unix
socket of the helper (sandbox-runtime's way, for a supervisor that cannot reach into a
namespace): it is one more process per run, inside the run's reach, and one more copy of
every byte.

Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import socket
from typing import Final

from roboz_helper.sandbox.init_wire import PROXY_FD, PROXY_PORT

PROXY_HOST: Final = "127.0.0.1"
PROXY_URL: Final = f"http://{PROXY_HOST}:{PROXY_PORT}"
_SYS_PIDFD_GETFD: Final = 438  # x86_64, like every system call number of the helper

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def take_listener(pidfd: int) -> socket.socket:
    """A copy of the proxy's listener that the run's pid 1 (``pidfd``) keeps at PROXY_FD
    (pidfd_getfd(2): needs the right to ptrace pid 1, which the helper that started it has).
    OSError if pid 1 has none (it is gone, or is not a proxy run's)."""
    fd = _libc.syscall(
        ctypes.c_long(_SYS_PIDFD_GETFD), ctypes.c_int(pidfd), ctypes.c_int(PROXY_FD), 0
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pidfd_getfd: {os.strerror(err)}")
    listener = socket.socket(fileno=fd)
    try:
        # The descriptor at PROXY_FD must be what pid 1 made there, not anything else.
        listening = listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        where = listener.getsockname() if listener.family == socket.AF_INET else None
        if not listening or where != (PROXY_HOST, PROXY_PORT):
            raise OSError(f"pid 1's descriptor {PROXY_FD} is not the proxy's listener")
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


def proxy_environment() -> dict[str, str]:
    """The variables that point a run's programs at the proxy: curl and libcurl (git) read the
    lower-case http_proxy only, most others either case; ``socks5h`` makes SOCKS clients send
    names rather than resolve them (the run cannot resolve)."""
    socks = f"socks5h://{PROXY_HOST}:{PROXY_PORT}"
    no_proxy = "localhost,127.0.0.1,::1"
    values = {
        "http_proxy": PROXY_URL,
        "https_proxy": PROXY_URL,
        "all_proxy": socks,
        "no_proxy": no_proxy,
    }
    return {**values, **{name.upper(): value for name, value in values.items()}}
