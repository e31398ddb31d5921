"""A run's network terms: the subset a request may ask for, and the resolver of the policy."""

from __future__ import annotations

import pytest
from roboz_helper.egress.allowlist import NetworkAllow
from roboz_helper.egress.config import EgressConfig
from roboz_helper.egress.resolver import DnsResolver, SystemResolver
from roboz_helper.egress.sessions import NetworkRequestError, narrowed, resolver_for, session_for

PROFILE = NetworkAllow(allow=("*.example.org:443", "pypi.org", "10.1.0.0/16:22"), max_bytes=99)


def test_no_request_gets_the_profiles_allowlist() -> None:
    assert str(narrowed("dev", PROFILE, None)) == "*.example.org:443, pypi.org, 10.1.0.0/16:22"


def test_a_request_gets_the_subset_it_names() -> None:
    got = narrowed("dev", PROFILE, ("a.example.org:443", "PYPI.org.:443", "a.example.org:443"))
    assert str(got) == "a.example.org:443, pypi.org:443"
    assert str(narrowed("dev", PROFILE, ())) == ""  # nothing at all: every attempt refused


@pytest.mark.parametrize(
    ("requested", "error"),
    [
        (("pypi.org", "evil.example:443"), "network_allow[1]: 'evil.example:443' is not within "
         "the allowlist of profile 'dev' (*.example.org:443, pypi.org, 10.1.0.0/16:22)"),
        (("*.example.org",), "network_allow[0]: '*.example.org' is not within"),
        (("example.org:443",), "network_allow[0]: 'example.org:443' is not within"),
        (("10.0.0.0/8:22",), "network_allow[0]: '10.0.0.0/8:22' is not within"),
        (("https://pypi.org",), "network_allow[0]: 'https://pypi.org': write a host name"),
    ],
)  # fmt: skip
def test_a_request_for_more_is_refused_naming_the_entry(
    requested: tuple[str, ...], error: str
) -> None:
    with pytest.raises(NetworkRequestError) as caught:
        narrowed("dev", PROFILE, requested)
    assert str(caught.value).startswith(error)


def test_the_resolver_and_limits_come_from_the_policy() -> None:
    assert isinstance(resolver_for(EgressConfig()), SystemResolver)
    dns = resolver_for(EgressConfig(nameservers=("192.0.2.53", "[2001:db8::53]:5353")))
    assert isinstance(dns, DnsResolver)
    assert dns.servers == (("192.0.2.53", 53), ("2001:db8::53", 5353))
    session = session_for("dev", PROFILE, None, dns, EgressConfig(connect_timeout_s=3.0))
    assert (session.limits.max_bytes, session.limits.connect_timeout_s) == (99, 3.0)
    assert session.policy == "dev"
