"""The proxy's door into a run: a listening socket on 127.0.0.1:3128 *inside* the run's own
network namespace, held and served by the helper outside it.

A socket belongs to the network namespace it was created in, whoever holds it later. So one
thread of the helper enters the run's namespace (``setns``, which changes the calling thread
only), creates, binds and listens, and returns; the helper's event loop then accepts on that
socket like on any other. The run's namespace keeps only ``lo``: no other interface, no route
off the loopback network, no resolver. A program that honours the proxy variables reaches the
proxy; one that ignores them finds no route (ENETUNREACH) and fails closed.

Why not a veth pair into the host (or a helper namespace): its host end is an address of the
host that the run could reach on every port the host listens on, unless firewall rules close
them again; it needs addresses and routes per run (netlink) and takes milliseconds to create
and destroy. Why not a forwarder process in the sandbox bridging the loopback port to a Unix
socket of the helper (sandbox-runtime's way, for a helper that cannot enter namespaces): it
is one more process per run, inside the run's reach, and one more copy of every byte.

Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Final

PROXY_HOST: Final = "127.0.0.1"
PROXY_PORT: Final = 3128
PROXY_URL: Final = f"http://{PROXY_HOST}:{PROXY_PORT}"
CLONE_NEWNET: Final = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd: int, nstype: int) -> None:
    """setns(2) for the calling thread (os.setns exists from Python 3.12 on)."""
    if _libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


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


class NamespaceSockets:
    """Makes sockets inside other network namespaces from one dedicated thread, which enters
    a namespace only for the duration of one call and returns to its own afterwards (so it
    never keeps a run's namespace alive)."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="egress-netns")
        self._home: int | None = None
        self._lock = threading.Lock()

    def _own_namespace(self) -> int:
        with self._lock:
            if self._home is None:
                self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            return self._home

    def _make(
        self, netns: int, family: int, kind: int, address: tuple[str, int] | None, listen: bool
    ) -> socket.socket:
        home = self._own_namespace()
        setns(netns, CLONE_NEWNET)
        try:
            sock = socket.socket(family, kind | socket.SOCK_CLOEXEC)
        finally:
            # Returning cannot fail for a namespace this thread was in; if it did, the next
            # call still enters its own target first, so no socket is made in the wrong one.
            setns(home, CLONE_NEWNET)
        try:
            if address is not None:
                sock.bind(address)
            if listen:
                sock.listen(128)
        except BaseException:
            sock.close()
            raise
        return sock

    def make(
        self,
        netns: int,
        family: int = socket.AF_INET,
        kind: int = socket.SOCK_STREAM,
        address: tuple[str, int] | None = None,
        listen: bool = False,
    ) -> socket.socket:
        """A socket in the network namespace ``netns`` refers to (an open /proc/PID/ns/net, or
        a pidfd of a process in it), bound and listening if asked."""
        return self._executor.submit(self._make, netns, family, kind, address, listen).result()

    def proxy_listener(self, netns: int) -> socket.socket:
        """The proxy's listening socket on 127.0.0.1:3128 of that namespace (``lo`` must be
        up there)."""
        return self.make(netns, address=(PROXY_HOST, PROXY_PORT), listen=True)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            if self._home is not None:
                with contextlib.suppress(OSError):
                    os.close(self._home)
                self._home = None
