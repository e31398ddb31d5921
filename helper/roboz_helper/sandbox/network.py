"""Network of a run: a fresh network namespace, with loopback up only for "loopback".

"none": the namespace's lo stays down, so nothing at all is reachable: no host address, no
127.0.0.1 (connect and bind fail with ENETUNREACH/EADDRNOTAVAIL), no abstract Unix sockets of
the host (they are scoped by network namespace); raw and packet sockets need CAP_NET_RAW, which
the run does not have, and odd families are refused by the seccomp filter.
"loopback": lo is brought up with pyroute2 (netlink) inside the run's namespace only, so the
run can talk to itself on 127.0.0.1 and nothing else.
"""

from __future__ import annotations

from typing import Any

_IPRoute: Any = None


def prepare(network: str) -> None:
    """Import pyroute2 in the parent (importing in the forked child would cost ~100 ms)."""
    global _IPRoute
    if network == "loopback" and _IPRoute is None:
        from pyroute2 import IPRoute

        _IPRoute = IPRoute


def bring_up_loopback() -> None:
    """Run in the child, inside the run's fresh network namespace."""
    if _IPRoute is None:
        raise RuntimeError("network.prepare('loopback') was not called before fork")
    with _IPRoute() as ipr:
        index = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=index, state="up")
