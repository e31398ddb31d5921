"""The proxy's resolvers: the DNS client against the test network's name server (never the
machine's), hostile answers, and the host's own resolver."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from roboz_helper.egress.resolver import DnsResolver, ResolveError, SystemResolver, parse_answer

from .netlab import DNS_SERVER, REMOTE, Lab, dns_answer


def _resolve(lab: Lab, name: str, resolver: DnsResolver | None = None) -> list[str]:
    found = lab.proxy.call((resolver or lab.resolver).resolve(name))
    return [str(a) for a in found]


def test_names_cnames_and_truncated_answers(lab: Lab) -> None:
    assert _resolve(lab, "files.remote.test") == [REMOTE]
    assert _resolve(lab, "alias.remote.test") == [REMOTE]  # through its CNAME
    lab.log.take()
    many = _resolve(lab, "many.remote.test")
    # The UDP answer was truncated: the resolver asked again over TCP and got them all (the
    # proxy keeps at most 16).
    assert many[0] == REMOTE and len(many) == 16
    assert ("dns-tcp", "11.0.7.1") in lab.log.take()


def test_a_name_the_server_does_not_know(lab: Lab) -> None:
    with pytest.raises(ResolveError, match="no such name"):
        _resolve(lab, "nothing.remote.test")


def test_a_server_that_does_not_answer_times_out(lab: Lab) -> None:
    silent = DnsResolver([("11.0.7.2", 5353)], timeout_s=0.5)  # nothing listens there
    with pytest.raises(ResolveError):
        _resolve(lab, "files.remote.test", silent)
    # The next server in the list is asked when the first fails.
    both = DnsResolver([("11.0.7.2", 5353), DNS_SERVER], timeout_s=4)
    assert _resolve(lab, "files.remote.test", both) == [REMOTE]


def _query(ident: int, name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + struct.pack(">HH", qtype, 1)


def test_answers_to_another_question_are_not_taken() -> None:
    answer = dns_answer(_query(7, "files.remote.test"), tcp=True)
    assert parse_answer(answer, 7, "files.remote.test", 1) == (0, [ipaddress.ip_address(REMOTE)])
    for ident, name, qtype in (
        (8, "files.remote.test", 1),
        (7, "other.remote.test", 1),
        (7, "files.remote.test", 28),
    ):
        with pytest.raises(ResolveError, match="another question"):
            parse_answer(answer, ident, name, qtype)
    # A query echoed back (no QR bit) is not an answer either.
    with pytest.raises(ResolveError):
        parse_answer(_query(7, "files.remote.test"), 7, "files.remote.test", 1)


def test_hostile_answers_end_in_an_error_not_a_hang() -> None:
    question = _query(9, "a.test")[12:]
    header = struct.pack(">HHHHHH", 9, 0x8180, 1, 1, 0, 0)
    # An answer whose owner name is a compression pointer to itself.
    looping = (
        header
        + question
        + b"\xc0"
        + bytes([12 + len(question)])
        + struct.pack(">HHIH", 1, 1, 0, 4)
        + b"\1\2\3\4"
    )
    with pytest.raises(ResolveError, match="compression"):
        parse_answer(looping, 9, "a.test", 1)
    with pytest.raises(ResolveError, match="truncated"):
        parse_answer(header + question + b"\xc0\x0c\x00\x01", 9, "a.test", 1)
    # A CNAME chain that loops ends with no address, not a hang.
    cname = b"\xc0\x0c" + struct.pack(">HHIH", 5, 1, 0, 2) + b"\xc0\x0c"
    loop = struct.pack(">HHHHHH", 9, 0x8180, 1, 1, 0, 0) + question + cname
    assert parse_answer(loop, 9, "a.test", 1) == (0, [])


def test_the_hosts_resolver_is_the_default(lab: Lab) -> None:
    # /etc/hosts names localhost on every machine the suite runs on. Both look-ups run on the
    # proxy's loop, whose threads are in the world namespace: a query that reaches DNS goes
    # nowhere (no route to the machine's name servers from there).
    found = lab.proxy.call(SystemResolver().resolve("localhost"))
    assert ipaddress.ip_address("127.0.0.1") in found
    with pytest.raises(ResolveError):
        lab.proxy.call(SystemResolver(timeout_s=5).resolve("nothing.invalid"))
