"""A name that resolves to one of the helper host's own addresses (DNS rebinding onto the
helper itself).

The helper host's public address is globally routable, so no special-purpose range covered
it: an allowed name pointing there reached every service the helper host binds to any
address, over its loopback, where services often trust local peers. The proxy now treats the
host's own addresses like the loopback range: used for a name only when an IP or CIDR entry
names them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from . import netlab
from .netlab import REMOTE, WORLD_ADDRESS, Lab


@pytest.fixture
def own_service(lab: Lab) -> Iterator[tuple[int, list[str]]]:
    """A service of the helper's host, on its public address (the proxy's namespace)."""
    server = lab.sockets.make(lab.world.fd, address=(WORLD_ADDRESS, 0), listen=True)
    accepted: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, peer = server.accept()
            except OSError:
                return
            accepted.append(peer[0])
            with conn:
                conn.sendall(b"the helper host's own service\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()


def test_a_name_resolving_to_the_helpers_own_address_is_refused(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, own_service: tuple[int, list[str]]
) -> None:
    port, accepted = own_service
    monkeypatch.setitem(netlab.NAMES, "self.remote.test", [("A", WORLD_ADDRESS)])
    # Two records, the helper's own first: only the other is used.
    monkeypatch.setitem(netlab.NAMES, "half.remote.test", [("A", WORLD_ADDRESS), ("A", REMOTE)])
    with lab.run(["self.remote.test", "half.remote.test"]) as run:
        direct = run.sh(f"curl -sS -m 5 -p telnet://self.remote.test:{port} </dev/null")
        half = run.sh("curl -sS -m 5 http://half.remote.test/h")
        report = run.finish()
    assert b"own service" not in direct.stdout, direct
    assert accepted == []
    refusal = next(r for r in report.refusals if r.host == "self.remote.test")
    assert (refusal.port, refusal.reason) == (port, "address"), report
    assert f"{WORLD_ADDRESS} (local)" in refusal.detail
    assert b"hello from files " in half.stdout, half
    assert report.connections == 1


def test_an_entry_naming_the_address_allows_it(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, own_service: tuple[int, list[str]]
) -> None:
    port, accepted = own_service
    monkeypatch.setitem(netlab.NAMES, "self.remote.test", [("A", WORLD_ADDRESS)])
    with lab.run(["self.remote.test", f"{WORLD_ADDRESS}:{port}"]) as run:
        by_name = run.sh(f"curl -sS -m 5 -p telnet://self.remote.test:{port} </dev/null")
        report = run.finish()
    assert b"own service" in by_name.stdout, by_name
    assert len(accepted) == 1 and report.refusals == ()
