"""IPv6 addresses that carry an IPv4 address, against an allowlist with a wide IPv6 entry.

An operator who allows ``::/0`` ("any IPv6 host") did not name 127.0.0.1 or the metadata
service, but ``[::ffff:127.0.0.1]`` is 127.0.0.1 to the kernel: the proxy, judging the IPv6
form, connected to the helper host's loopback and to 169.254.169.254. An IPv4-mapped
address is now its IPv4 address (IPv4 entries decide it, and none of these names it), an
entry written in the mapped form is refused with the IPv4 form to write, and a NAT64 or
6to4 address carrying a special-purpose IPv4 address needs an entry naming that address.
"""

from __future__ import annotations

import pytest
from roboz_helper.egress.allowlist import AllowlistError, destination, parse_entry

from . import netlab
from .netlab import Lab, RunNet

WIDE = ["::/0", "files.remote.test:7", "mapped.remote.test"]
# A SOCKS5 CONNECT by IPv6 address (type 4) to ::ffff:127.0.0.1 port 80.
SOCKS_MAPPED = (
    'python3 -c \'import socket,sys; s=socket.create_connection(("127.0.0.1",3128)); '
    's.sendall(b"\\x05\\x01\\x00"); s.recv(2); '
    's.sendall(b"\\x05\\x01\\x00\\x04" + socket.inet_pton(socket.AF_INET6, "::ffff:127.0.0.1")'
    ' + b"\\x00\\x50"); print(s.recv(10)); s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n"); '
    "print(s.recv(200))'"
)
ATTEMPTS = [
    ("connect-loopback", "curl -sS -m 5 -p http://[::ffff:127.0.0.1]:80/", "127.0.0.1", "ip-literal"),
    ("get-metadata", "curl -sS -m 5 http://[::ffff:169.254.169.254]/", "169.254.169.254", "ip-literal"),
    ("hex-form", "curl -sS -m 5 -p http://[::ffff:7f00:1]:80/", "127.0.0.1", "ip-literal"),
    ("socks-by-address", SOCKS_MAPPED, "127.0.0.1", "ip-literal"),
    # NAT64: a translator would deliver it to 169.254.169.254.
    ("nat64-metadata", "curl -sS -m 5 -p http://[64:ff9b::a9fe:a9fe]:80/", "64:ff9b::a9fe:a9fe",
     "address"),
    # A name whose AAAA record is the mapped loopback.
    ("name-to-mapped", "curl -sS -m 5 -p http://mapped.remote.test:80/", "mapped.remote.test",
     "address"),
]  # fmt: skip


def _reached(lab: Lab) -> list[tuple[str, str]]:
    return [(server, peer) for server, peer in lab.log.take() if not server.startswith("dns")]


@pytest.mark.parametrize(
    ("command", "host", "reason"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS]
)
def test_a_wide_ipv6_entry_does_not_reach_ipv4_loopback_or_metadata(
    lab: Lab, monkeypatch: pytest.MonkeyPatch, command: str, host: str, reason: str
) -> None:
    monkeypatch.setitem(netlab.NAMES, "mapped.remote.test", [("AAAA", "::ffff:127.0.0.1")])
    lab.log.take()
    with lab.run(WIDE) as run:
        result = run.sh(command)
        report = run.finish()
    out = result.stdout.decode()
    assert "hello from" not in out, out
    assert (host, 80, reason) in [(r.host, r.port, r.reason) for r in report.refusals], report
    assert report.connections == 0
    assert _reached(lab) == []  # neither the helper's loopback nor the metadata host


def test_the_mapped_form_of_an_allowed_ipv4_address_is_that_address(lab: Lab) -> None:
    lab.log.take()
    with lab.run([f"{netlab.REMOTE}:80"]) as run:
        run_ok = _get(run, f"http://[::ffff:{netlab.REMOTE}]/m")
        report = run.finish()
    assert "hello from files " in run_ok, run_ok
    assert report.refusals == () and report.connections == 1


def _get(run: RunNet, url: str) -> str:
    return run.sh(f"curl -sS -m 5 {url}").stdout.decode()


@pytest.mark.parametrize("text", ["[::ffff:127.0.0.1]", "[::ffff:11.0.7.2]:443", "::ffff:0:0/96",
                                  "::ffff:10.0.0.0/104"])  # fmt: skip
def test_an_entry_in_the_mapped_form_is_refused_with_the_ipv4_form(text: str) -> None:
    with pytest.raises(AllowlistError, match="IPv4"):
        parse_entry(text)


def test_a_mapped_destination_is_its_ipv4_address() -> None:
    dest = destination("[::ffff:127.0.0.1]", 80)
    assert (dest.host, str(dest)) == ("127.0.0.1", "127.0.0.1:80")
