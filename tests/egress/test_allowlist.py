"""Allowlist entries, destinations and address ranges: what parses, what matches, what a run
may ask for, and which addresses a name may reach."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from roboz_helper.egress.addresses import special_range
from roboz_helper.egress.allowlist import (
    AllowlistError,
    destination,
    parse_allowlist,
    parse_entry,
)


@pytest.mark.parametrize(
    ("text", "shown", "kind"),
    [
        ("pypi.org", "pypi.org", "name"),
        ("PyPI.Org.:443", "pypi.org:443", "name"),
        ("*.githubusercontent.com", "*.githubusercontent.com", "wildcard"),
        ("*.example.org:443", "*.example.org:443", "wildcard"),
        ("git.example.org:22", "git.example.org:22", "name"),
        ("192.0.2.7", "192.0.2.7", "address"),
        ("192.0.2.7:22", "192.0.2.7:22", "address"),
        ("10.1.0.0/16:22", "10.1.0.0/16:22", "address"),
        ("[2001:db8::7]:443", "[2001:db8::7]:443", "address"),
        ("2001:db8::/32", "2001:db8::/32", "address"),
        ("[fd00::/8]:22", "[fd00::/8]:22", "address"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example", "name"),
        ("_acme.example.org", "_acme.example.org", "name"),
    ],
)
def test_entries_parse_to_their_normal_form(text: str, shown: str, kind: str) -> None:
    entry = parse_entry(text)
    assert (str(entry), entry.kind) == (shown, kind)
    assert parse_entry(str(entry)) == entry  # the normal form reads back as itself


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("https://pypi.org", "not a URL"),
        ("pypi.org/simple", "not a URL or a path"),
        ("*.com", "at least two labels"),
        ("*", "'*' only as the whole first label"),
        ("a*.example.org", "'*' only as the whole first label"),
        ("*.*.example.org", "'*' only as the whole first label"),
        ("127.1", "four decimal numbers"),
        ("0x7f000001", "four decimal numbers"),
        ("010.0.0.1", "four decimal numbers"),
        ("example.123", "four decimal numbers"),
        ("pypi.org:0", "1..65535"),
        ("pypi.org:65536", "1..65535"),
        ("pypi.org:0443", "1..65535"),
        ("pypi.org:+443", "1..65535"),
        ("pypi.org:\u0664\u0664\u0663", "1..65535"),
        ("pypi.org:", "1..65535"),
        ("10.1.0.1/16", "host bits set"),
        ("[10.0.0.1]:22", "brackets are for IPv6 only"),
        ("[2001:db8::1", "'[' without ']'"),
        ("fe80::1%eth0", "zone"),
        ("0.0.0.0", "unspecified addresses are never a destination"),
        ("::", "unspecified addresses are never a destination"),
        # One address written as a network is that address (Hypothesis found ::/128 taken).
        ("::/128", "unspecified addresses are never a destination"),
        ("0.0.0.0/32", "unspecified addresses are never a destination"),
        ("224.0.0.1/32", "multicast addresses are never a destination"),
        ("224.0.0.1", "multicast"),
        ("b\u00fccher.example", "xn-- form"),
        ("exa mple.org", "spaces or control characters"),
        ("evil.org\n", "spaces or control characters"),
        ("", "empty"),
        ("-a.example.org", "not a host name"),
        ("a..example.org", "not a host name"),
        ("a" * 64 + ".example.org", "not a host name"),
        ("a." * 127 + "org", "1..253 characters"),
    ],
)
def test_bad_entries_are_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(AllowlistError, match=None) as caught:
        parse_entry(text)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_repeated_entry_is_an_error_naming_the_first() -> None:
    allowlist, errors = parse_allowlist(["pypi.org:443", "x.example.org", "PYPI.org.:443"])
    assert errors == [(2, "'PYPI.org.:443' repeats entry [0]")]
    assert [str(e) for e in allowlist.entries] == ["pypi.org:443", "x.example.org"]


def _allowlist(*texts: str):  # type: ignore[no-untyped-def]
    allowlist, errors = parse_allowlist(texts)
    assert not errors
    return allowlist


def test_matching_names_ports_wildcards_and_literals() -> None:
    allowlist = _allowlist("pypi.org:443", "*.githubusercontent.com", "10.1.0.0/16:22")
    decide = lambda host, port: str(allowlist.match(destination(host, port)))  # noqa: E731
    assert decide("pypi.org", 443) == "pypi.org:443"
    assert decide("PYPI.ORG.", 443) == "pypi.org:443"
    assert decide("pypi.org", 80) == "port"
    assert decide("files.pypi.org", 443) == "not-allowed"
    assert decide("raw.githubusercontent.com", 8443) == "*.githubusercontent.com"
    assert decide("a.b.githubusercontent.com", 1) == "*.githubusercontent.com"
    # The wildcard does not name its own suffix, nor a name merely ending in it.
    assert decide("githubusercontent.com", 443) == "not-allowed"
    assert decide("evilgithubusercontent.com", 443) == "not-allowed"
    assert decide("10.1.2.3", 22) == "10.1.0.0/16:22"
    assert decide("10.1.2.3", 23) == "port"
    assert decide("10.2.0.1", 22) == "ip-literal"
    # The IPv4-mapped form is the IPv4 address (the kernel connects to that): IPv4 entries
    # decide it (tests/egress/test_mapped_addresses.py has why).
    assert decide("[::ffff:10.1.2.3]", 22) == "10.1.0.0/16:22"
    assert decide("[::ffff:10.2.0.1]", 22) == "ip-literal"


def test_a_name_never_matches_an_address_and_an_address_never_a_name() -> None:
    allowlist = _allowlist("files.example.org", "192.0.2.7")
    assert allowlist.match(destination("192.0.2.8", 443)) == "ip-literal"
    assert allowlist.match(destination("files.example.org", 1)) != "not-allowed"
    assert allowlist.match(destination("seven.example.org", 443)) == "not-allowed"


@pytest.mark.parametrize(
    ("requested", "covered"),
    [
        ("a.example.org:443", True),  # by *.example.org:443
        ("*.a.example.org:443", True),
        ("*.example.org:443", True),
        ("*.example.org", False),  # any port: more than the policy's :443
        ("example.org:443", False),  # the wildcard does not name its suffix
        ("pypi.org:443", True),  # by pypi.org (any port)
        ("pypi.org", True),
        ("*.pypi.org", False),  # a name does not cover the names below it
        ("10.1.0.0/24", True),
        ("10.1.2.3:22", True),
        ("10.0.0.0/8", False),
        ("[fd00::1]", False),
        ("other.org", False),
    ],
)
def test_a_run_may_ask_for_a_subset_only(requested: str, covered: bool) -> None:
    policy = _allowlist("*.example.org:443", "pypi.org", "10.1.0.0/16")
    assert policy.subset([parse_entry(requested)]) == ([] if covered else [0])


@pytest.mark.parametrize(
    ("host", "port", "says"),
    [
        ("127.1", 80, "four decimal numbers"),
        ("0x7f.0.0.1", 80, "four decimal numbers"),
        ("2130706433", 80, "four decimal numbers"),
        ("evil.example\r\nX-Injected: 1", 80, "is not an IP address"),
        ("evil.example\r\n", 80, "not a host name"),
        ("files.example.org", 0, "1..65535"),
        ("files.example.org", 70000, "1..65535"),
        ("[files.example.org]", 80, "brackets are for IPv6 only"),
        ("fe80::1%eth0", 80, "zone"),
        ("", 80, "not a host name"),
    ],
)
def test_destinations_that_could_mean_something_else_are_refused(
    host: str, port: int, says: str
) -> None:
    with pytest.raises(AllowlistError) as caught:
        destination(host, port)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("10.9.8.7", "private"),
        ("172.31.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "shared"),
        ("169.254.169.254", "metadata"),
        ("169.254.170.2", "metadata"),
        ("100.100.100.200", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("198.18.0.1", "benchmarking"),
        ("192.0.2.1", "documentation"),
        ("2001:db8::1", "documentation"),
        # IPv6 forms that deliver to an IPv4 address are judged by it.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "metadata"),  # 6to4 of 169.254.169.254
        ("::127.0.0.1", "reserved"),  # the deprecated IPv4-compatible form
        ("8.8.8.8", None),
        ("11.0.7.2", None),
        ("2606:4700::1", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_special_ranges(address: str, kind: str | None) -> None:
    assert special_range(ipaddress.ip_address(address)) == kind


@given(st.text(max_size=80))
def test_any_text_is_an_entry_or_a_one_line_error(text: str) -> None:
    try:
        entry = parse_entry(text)
    except AllowlistError as exc:
        assert "\n" not in str(exc)
    else:
        assert parse_entry(str(entry)) == entry


@given(st.text(max_size=80), st.integers(min_value=-5, max_value=70000))
def test_any_destination_is_normalized_or_refused(host: str, port: int) -> None:
    try:
        dest = destination(host, port)
    except AllowlistError as exc:
        assert "\n" not in str(exc)
    else:
        assert dest.host.isascii() and dest.host.isprintable() and " " not in dest.host
        assert 1 <= dest.port <= 65535
