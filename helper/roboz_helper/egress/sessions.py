"""From a profile, a run request and the policy's ``[egress]`` table to one run's proxy session.

A request may narrow its profile's allowlist (``network_allow``): each entry it names must be
covered by an entry of the profile (a subset, never more), else the run is refused naming
the entry. The session gets the narrowed allowlist, the profile's limits and the resolver of
the policy in force when the run was asked for: a reload changes what later runs get, never
a run under way. Standard library and msgspec only.
"""

from __future__ import annotations

from roboz_helper.egress.allowlist import Allowlist, AllowlistError, NetworkAllow, parse_entry
from roboz_helper.egress.config import (
    EgressConfig,
    allowlist_of,
    nameserver_address,
)
from roboz_helper.egress.proxy import EgressSession, Limits
from roboz_helper.egress.resolver import DnsResolver, Resolver, SystemResolver


class NetworkRequestError(ValueError):
    """A run asked for more network than its profile allows, or for nonsense; the message
    names the request's field."""


def narrowed(profile: str, network: NetworkAllow, requested: tuple[str, ...] | None) -> Allowlist:
    """The allowlist a run gets: its profile's, or the subset the request names."""
    allowed = allowlist_of(network)
    if requested is None:
        return allowed
    entries = []
    for i, text in enumerate(requested):
        try:
            entries.append(parse_entry(text))
        except AllowlistError as exc:
            raise NetworkRequestError(f"network_allow[{i}]: {exc}") from None
    for i in allowed.subset(entries):
        raise NetworkRequestError(
            f"network_allow[{i}]: {requested[i]!r} is not within the allowlist of profile "
            f"{profile!r} ({allowed})"
        )
    return Allowlist(tuple(dict.fromkeys(entries)))


def resolver_for(egress: EgressConfig) -> Resolver:
    if not egress.nameservers:
        return SystemResolver(egress.resolve_timeout_s)
    servers = [nameserver_address(s) for s in egress.nameservers]
    return DnsResolver(servers, egress.resolve_timeout_s)


def session_for(
    profile: str,
    network: NetworkAllow,
    requested: tuple[str, ...] | None,
    resolver: Resolver,
    egress: EgressConfig,
) -> EgressSession:
    """A run's proxy session (not yet serving: EgressSession.start takes the listener)."""
    limits = Limits(
        max_bytes=network.max_bytes,
        max_connections=network.max_connections,
        connect_timeout_s=egress.connect_timeout_s,
    )
    return EgressSession(narrowed(profile, network, requested), resolver, profile, limits)
