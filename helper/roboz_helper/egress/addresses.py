"""Which IP addresses a run's proxy may connect to without the policy naming them.

A name on an allowlist says "this host on the internet". Its DNS answer is not trusted to say
where that is: a name that resolves to 127.0.0.1, to the cloud's metadata service or into the
operator's private network (DNS rebinding, or a record the attacker controls) would turn the
proxy into a door to the helper's own host and its neighbours. So an address in one of the
special-purpose ranges below is used only when an IP or CIDR entry of the allowlist covers it
(the operator named it); a name entry alone reaches globally routable addresses only.

The table follows the IANA special-purpose address registries (entries not "globally
reachable"), written out here rather than taken from ``ipaddress``'s ``is_global`` and
``is_private``, whose answers differ between Python 3.11 and 3.13. IPv6 forms that carry an
IPv4 address (IPv4-mapped, NAT64, 6to4) are judged by the IPv4 address they carry, since the
kernel or a translator delivers them there.

Standard library only.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_N = ipaddress.ip_network

# Most specific first: the first network that contains an address names its range.
_SPECIAL: Final[tuple[tuple[IPNetwork, str], ...]] = (
    # Cloud metadata services (AWS/GCP/Azure/OCI, AWS ECS task metadata, Alibaba, AWS IPv6):
    # named on their own so that a refusal says what was reached for.
    (_N("169.254.169.254/32"), "metadata"),
    (_N("169.254.170.2/32"), "metadata"),
    (_N("100.100.100.200/32"), "metadata"),
    (_N("fd00:ec2::254/128"), "metadata"),
    (_N("0.0.0.0/8"), "unspecified"),  # 0.0.0.0 reaches the local host on Linux
    (_N("10.0.0.0/8"), "private"),
    (_N("100.64.0.0/10"), "shared"),  # carrier-grade NAT
    (_N("127.0.0.0/8"), "loopback"),
    (_N("169.254.0.0/16"), "link-local"),
    (_N("172.16.0.0/12"), "private"),
    (_N("192.0.0.0/24"), "reserved"),  # IETF protocol assignments
    (_N("192.0.2.0/24"), "documentation"),
    (_N("192.88.99.0/24"), "reserved"),  # the former 6to4 relay anycast
    (_N("192.168.0.0/16"), "private"),
    (_N("198.18.0.0/15"), "benchmarking"),
    (_N("198.51.100.0/24"), "documentation"),
    (_N("203.0.113.0/24"), "documentation"),
    (_N("224.0.0.0/4"), "multicast"),
    (_N("255.255.255.255/32"), "broadcast"),
    (_N("240.0.0.0/4"), "reserved"),
    (_N("::/128"), "unspecified"),
    (_N("::1/128"), "loopback"),
    (_N("::/8"), "reserved"),  # includes the deprecated IPv4-compatible addresses
    (_N("64:ff9b:1::/48"), "private"),  # local-use NAT64
    (_N("100::/64"), "reserved"),  # discard-only
    (_N("2001::/23"), "reserved"),  # IETF protocol assignments (Teredo, ORCHID, ...)
    (_N("2001:db8::/32"), "documentation"),
    (_N("fc00::/7"), "private"),  # unique local
    (_N("fe80::/10"), "link-local"),
    (_N("fec0::/10"), "private"),  # the deprecated site-local
    (_N("ff00::/8"), "multicast"),
)

# Never a destination, whatever the policy names: no connection to them means what an
# allowlist could have meant.
NEVER: Final = frozenset({"unspecified", "multicast", "broadcast"})

_NAT64 = _N("64:ff9b::/96")
_SIX_TO_FOUR = _N("2002::/16")
MAPPED: Final = _N("::ffff:0:0/96")


def delivered(address: IPAddress) -> IPAddress:
    """The address a connection to ``address`` reaches on this host: an IPv4-mapped IPv6
    address is its IPv4 address (the kernel connects to that, over IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_local(address: IPAddress) -> bool:
    """Whether ``address`` is one of this host's own (in the calling thread's network
    namespace), however globally routable: a connection to it goes over the host's loopback
    to every service bound to any address, which often trusts local peers. The kernel's
    route to a local address has that address as its source; a UDP connect() is the route
    lookup (nothing is sent)."""
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    with socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as probe:
        try:
            probe.connect((str(address), 9))
            source = str(probe.getsockname()[0]).split("%", 1)[0]
        except OSError:
            return False
    return ipaddress.ip_address(source) == address


def carried_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address delivers to (mapped, NAT64, 6to4), if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    return None


def special_range(address: IPAddress) -> str | None:
    """The special-purpose range an address lies in ("loopback", "private", "metadata", ...),
    or None for a globally routable address."""
    inner = carried_ipv4(address)
    if inner is not None:
        return special_range(inner)
    for network, name in _SPECIAL:
        if address.version == network.version and address in network:
            return name
    return None


def ranges_overlapped(network: IPNetwork) -> list[str]:
    """The special-purpose ranges a policy's CIDR entry reaches into (for check-policy)."""
    found: list[str] = []
    for special, name in _SPECIAL:
        if special.version == network.version and network.overlaps(special) and name not in found:
            found.append(name)
    return found
