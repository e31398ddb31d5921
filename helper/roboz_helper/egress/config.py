"""What a helper policy says about egress, checked: a profile's ``network = {allow = [...]}``
table and the policy's ``[egress]`` table. Errors name the field inside the table
(``allow[1]: ...``); policy.py puts the table's own path in front.

Standard library and msgspec only: policy.py (and so ``check-policy``) imports it.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

from roboz_helper.egress.allowlist import Allowlist, NetworkAllow, parse_allowlist, parse_entry

MAX_CONNECTIONS: Final = 4096
_MAX_BYTES: Final = 2**62  # like every integer limit of a policy: a 64-bit field somewhere


class EgressConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """How the helper's egress proxy reaches the network for runs with an allowlist."""

    # Name servers the proxy asks ("192.0.2.53", "[2001:db8::53]:5353"); empty: the host's
    # resolver (getaddrinfo).
    nameservers: tuple[str, ...] = ()
    resolve_timeout_s: float = 5.0
    connect_timeout_s: float = 10.0


class EgressConfigError(ValueError):
    """A network or [egress] table is wrong; the message starts with the field's name."""


def allowlist_of(network: NetworkAllow) -> Allowlist:
    """A profile's allowlist, parsed; the first bad entry is an error."""
    allowlist, errors = parse_allowlist(network.allow)
    if errors:
        raise EgressConfigError(f"allow[{errors[0][0]}]: {errors[0][1]}")
    return allowlist


def check_network(network: NetworkAllow) -> None:
    if not network.allow:
        raise EgressConfigError('allow: empty; write network = "none" for no network')
    allowlist_of(network)
    if network.max_bytes is not None and not 1 <= network.max_bytes <= _MAX_BYTES:
        raise EgressConfigError(
            f"max_bytes: must be within 1..{_MAX_BYTES}, got {network.max_bytes}"
        )
    if not 1 <= network.max_connections <= MAX_CONNECTIONS:
        raise EgressConfigError(
            f"max_connections: must be within 1..{MAX_CONNECTIONS}, got {network.max_connections}"
        )


def nameserver_address(text: str) -> tuple[str, int]:
    """(address, port) of a name server entry: an IP literal with an optional port (53)."""
    entry = parse_entry(text)
    net = entry.network
    if net is None or net.num_addresses != 1:
        raise EgressConfigError(f"{text!r}: a name server is an IP address with an optional port")
    return str(net.network_address), entry.port or 53


def check_egress(egress: EgressConfig) -> None:
    for i, server in enumerate(egress.nameservers):
        try:
            nameserver_address(server)
        except ValueError as exc:
            raise EgressConfigError(f"nameservers[{i}]: {exc}") from None
    for field in ("resolve_timeout_s", "connect_timeout_s"):
        value = getattr(egress, field)
        if not (math.isfinite(value) and value > 0):
            raise EgressConfigError(f"{field}: must be a positive number, got {value!r}")
