"""What a run's network did: bytes each way, connections, and every attempt that did not get
through, with the host, the port and the rule that decided.

Msgspec Structs, because a run's completion carries them to the client (the library turns
each refusal into a typed result for the agent). Standard library and msgspec only: the
wire protocol imports this module.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

# Why an attempt did not get through. The first group is the policy's decision; the second,
# the run's limits; the third, what the proxy could not do for an allowed destination.
RefusalReason = Literal[
    "not-allowed",  # no entry names the host
    "port",  # entries name the host, on other ports
    "ip-literal",  # an address no IP or CIDR entry covers (names do not cover their addresses)
    "address",  # the name resolves only to addresses in special-purpose ranges not named
    "sni",  # TLS on 443 whose ClientHello does not name the requested host
    "byte-limit",  # the run's byte limit is spent
    "connection-limit",  # the run has as many connections open as it may
    "malformed",  # not a proxy request the helper understands
    "unsupported",  # SOCKS BIND or UDP ASSOCIATE, SOCKS4, ...
    "unresolved",  # the name has no address (or the resolver did not answer)
    "unreachable",  # no address of an allowed destination accepted the connection
]
POLICY_REASONS: Final = frozenset({"not-allowed", "port", "ip-literal", "address", "sni"})

# Distinct refusals a report lists; the rest are only counted (a run retrying in a loop must
# not grow its completion without bound).
MAX_LISTED: Final = 32


class Refusal(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Attempts to one destination that were refused for one reason, counted."""

    host: str  # as the run asked for it (normalized), "" when it never said
    port: int  # 0 when it never said
    reason: RefusalReason
    # The allowlist entry involved ("" when none matched); for "address", the range.
    rule: str = ""
    detail: str = ""
    count: int = 1

    def text(self, policy: str) -> str:
        """One line an agent (or its user) can act on."""
        where = f"{self.host}:{self.port}" if self.host else "a connection"
        times = f" ({self.count} attempts)" if self.count > 1 else ""
        if self.reason in POLICY_REASONS:
            why = f"is not allowed by policy {policy!r}"
        elif self.reason in ("byte-limit", "connection-limit"):
            limit = self.reason.replace("-", " ")
            why = f"was refused: the run reached its {limit} (policy {policy!r})"
        else:
            why = f"failed ({self.reason})"
        detail = f": {self.detail}" if self.detail else ""
        return f"network: {where} {why}{detail}{times}"


class NetworkReport(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A run's traffic through the helper's proxy."""

    policy: str  # the profile whose allowlist applied
    bytes_out: int = 0  # from the run to the remote hosts (payload, after the handshakes)
    bytes_in: int = 0  # from the remote hosts to the run
    connections: int = 0  # tunnels and forwarded requests that reached a remote host
    refused: int = 0  # every attempt that did not get through, counted once each
    refusals: tuple[Refusal, ...] = ()  # at most MAX_LISTED distinct ones

    def lines(self) -> list[str]:
        return [r.text(self.policy) for r in self.refusals]
