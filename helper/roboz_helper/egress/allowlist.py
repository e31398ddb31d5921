"""Network allowlists: the entries a policy writes, the hosts a run asks for, and the matching.

An entry is one of::

    pypi.org                 a host name, any port
    pypi.org:443             a host name on one port
    *.githubusercontent.com  every name below it (not the name itself), any port
    *.example.org:443        the same, one port
    192.0.2.7  192.0.2.7:22  an IPv4 address (four decimal numbers), any port or one
    10.1.0.0/16:22           an IPv4 network (host bits zero)
    [2001:db8::7]:443        an IPv6 address or network; brackets when a port follows
    2001:db8::/32            the same without a port

Names are compared in lower case without a trailing dot, written in ASCII (an
internationalized name in its ``xn--`` form). A name never matches an IP address, even one it
resolves to: an address is reachable by its literal only where an IP or CIDR entry covers it,
and a name's address only when it is globally routable or an IP or CIDR entry covers it
(``addresses.py``). A wildcard needs at least two labels after ``*.``, so ``*.com`` is refused.
Strings that an address parser would read as a number (``127.1``, ``0x7f000001``, ``010.0.0.1``)
are neither names nor addresses: refused as entries and as destinations.

``NetworkAllow`` is the form a policy writes and the wire carries (the greeting's limits).
Standard library and msgspec only: policy.py and the wire protocol import it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import msgspec

from roboz_helper.egress.addresses import (
    MAPPED,
    NEVER,
    IPAddress,
    IPNetwork,
    delivered,
    ranges_overlapped,
    special_range,
)

MAX_NAME: Final = 253
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_DIGITS = re.compile(r"[0-9]+")
# What inet_aton would take for an address: the last label numeric (decimal, octal, 0x hex).
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")

EntryKind = Literal["name", "wildcard", "address"]


class NetworkAllow(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """``network = {allow = [...]}``: a run reaches these hosts through the helper's proxy
    and nothing else."""

    allow: tuple[str, ...]
    # Bytes through the proxy per run, both ways together; none: unlimited.
    max_bytes: int | None = None
    # Connections to the proxy open at once per run.
    max_connections: int = 64


class AllowlistError(ValueError):
    """An entry or a destination is not well-formed; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One allowlist entry, parsed. ``host`` is the name, or the suffix of a wildcard (without
    ``*.``); ``network`` is set for addresses and networks; ``port`` None means any port."""

    kind: EntryKind
    host: str
    network: IPNetwork | None
    port: int | None

    def __str__(self) -> str:
        if self.kind == "wildcard":
            where = f"*.{self.host}"
        elif self.kind == "name":
            where = self.host
        else:
            assert self.network is not None
            single = self.network.num_addresses == 1
            where = str(self.network.network_address) if single else str(self.network)
            if self.network.version == 6 and self.port is not None:
                where = f"[{where}]"
        return where if self.port is None else f"{where}:{self.port}"

    def explain(self) -> str:
        """What the entry reaches, for check-policy."""
        port = "any port" if self.port is None else f"port {self.port}"
        if self.kind == "name":
            return f"{self} ({port}; its globally routable addresses)"
        if self.kind == "wildcard":
            return f"{self} (names below {self.host}, not {self.host} itself; {port})"
        assert self.network is not None
        special = ranges_overlapped(self.network)
        named = f"; names {', '.join(special)} addresses" if special else ""
        return f"{self} ({port}{named})"

    def allows_port(self, port: int) -> bool:
        return self.port is None or self.port == port

    def names(self, name: str) -> bool:
        """Whether this entry matches a host name (any port)."""
        if self.kind == "name":
            return name == self.host
        return self.kind == "wildcard" and name.endswith("." + self.host)

    def covers_address(self, address: IPAddress) -> bool:
        net = self.network
        return net is not None and net.version == address.version and address in net

    def covers(self, other: Entry) -> bool:
        """Whether everything ``other`` allows, this entry allows too (a run's request for a
        subset of its profile's allowlist is checked with this)."""
        if self.port is not None and other.port != self.port:
            return False
        if self.kind == "address":
            net, sub = self.network, other.network
            assert net is not None
            return sub is not None and sub.version == net.version and sub.subnet_of(net)  # type: ignore[arg-type]
        if other.kind == "address":
            return False
        if self.kind == "name":
            return other.kind == "name" and other.host == self.host
        return (other.kind == "wildcard" and other.host == self.host) or self.names(other.host)


def _port(text: str) -> int:
    # ASCII digits without a leading zero: int() would also take "٤٤٣", "+443" and "0443".
    if not _DIGITS.fullmatch(text) or text.startswith("0") or len(text) > 5:
        raise AllowlistError(f"port {text!r} is not a number within 1..65535")
    port = int(text)
    if not 1 <= port <= 65535:
        raise AllowlistError(f"port {port} is not within 1..65535")
    return port


def host_name(text: str) -> str:
    """A host name in its normal form (lower case, no trailing dot), or AllowlistError."""
    if not text.isascii():
        raise AllowlistError(
            f"{text!r} is not ASCII; write an internationalized name in its xn-- form"
        )
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > MAX_NAME:
        raise AllowlistError(f"{text!r} is not a host name (1..{MAX_NAME} characters)")
    labels = name.split(".")
    for label in labels:
        if not _LABEL.fullmatch(label):
            raise AllowlistError(
                f"{text!r} is not a host name (labels of letters, digits, '-' and '_', "
                "1..63 characters, not starting or ending with '-')"
            )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        raise AllowlistError(
            f"{text!r} is neither a host name nor an IP address (write IPv4 as four decimal "
            "numbers)"
        )
    return name


def ip_address(text: str) -> IPAddress:
    """An IP literal (IPv4 dotted quad, IPv6 without a zone), or AllowlistError."""
    if "%" in text:
        raise AllowlistError(f"{text!r}: IPv6 zone indexes are not allowed")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        hint = "" if ":" in text else " (write IPv4 as four decimal numbers)"
        raise AllowlistError(f"{text!r} is not an IP address{hint}") from None


def _network(text: str) -> IPNetwork:
    if "%" in text:
        raise AllowlistError(f"{text!r}: IPv6 zone indexes are not allowed")
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            raise AllowlistError(
                f"{text!r} has host bits set (write the network address)"
            ) from None
        raise AllowlistError(f"{text!r} is not an IP network") from None


def _split_port(text: str) -> tuple[str, int | None, bool]:
    """(host, port, bracketed) of ``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise AllowlistError(f"{text!r}: '[' without ']'")
        rest = text[close + 1 :]
        if rest and not rest.startswith(":"):
            raise AllowlistError(f"{text!r}: only ':PORT' may follow ']'")
        return text[1:close], (_port(rest[1:]) if rest else None), True
    if text.count(":") > 1:  # an IPv6 literal without brackets has no port
        return text, None, False
    host, sep, port = text.partition(":")
    return host, (_port(port) if sep else None), False


def parse_entry(text: str) -> Entry:
    """Parse one allowlist entry; AllowlistError says what is wrong with it."""
    if not isinstance(text, str):
        raise AllowlistError(f"expected a string, got {type(text).__name__}")
    if not text or not text.isprintable() or any(c.isspace() for c in text):
        raise AllowlistError(f"{text!r}: empty, or contains spaces or control characters")
    if "://" in text or text.startswith("//"):
        raise AllowlistError(f"{text!r}: write a host name with an optional port, not a URL")
    host, port, bracketed = _split_port(text)
    if "/" in host:
        prefix = host.split("/", 1)[0]
        if not (":" in prefix or _looks_numeric(prefix)):
            raise AllowlistError(
                f"{text!r}: write a host name with an optional port, not a URL or a path"
            )
        network = _network(host)
        if bracketed and network.version == 4:
            raise AllowlistError(f"{text!r}: brackets are for IPv6 only")
        if network.num_addresses == 1:
            # One address written as a network (``::/128``) is that address, with its checks.
            return _address_entry(text, network.network_address, port)
        if network.version == 6 and network.subnet_of(MAPPED):  # type: ignore[arg-type]
            raise AllowlistError(
                f"{text!r}: IPv4-mapped addresses are IPv4 addresses; write the IPv4 network"
            )
        return Entry("address", "", network, port)
    if bracketed or ":" in host:
        address = ip_address(host)
        if address.version != 6:
            raise AllowlistError(f"{text!r}: brackets are for IPv6 only")
        return _address_entry(text, address, port)
    if _looks_numeric(host):
        return _address_entry(text, ip_address(host), port)
    if host.startswith("*.") and "*" not in host[2:]:
        suffix = host_name(host[2:])
        if suffix.count(".") < 1:
            raise AllowlistError(
                f"{text!r}: a wildcard needs at least two labels after '*.' (*.example.org)"
            )
        return Entry("wildcard", suffix, None, port)
    if "*" in host:
        raise AllowlistError(f"{text!r}: '*' only as the whole first label ('*.example.org')")
    return Entry("name", host_name(host), None, port)


def _looks_numeric(host: str) -> bool:
    last = host.rstrip(".").rsplit(".", 1)[-1].lower()
    return bool(last) and _NUMERIC_LABEL.fullmatch(last) is not None


def _address_entry(text: str, address: IPAddress, port: int | None) -> Entry:
    if delivered(address) != address:
        raise AllowlistError(
            f"{text!r}: an IPv4-mapped address is the IPv4 address {delivered(address)}; write that"
        )
    if special_range(address) in NEVER:
        raise AllowlistError(
            f"{text!r}: {special_range(address)} addresses are never a destination"
        )
    return Entry("address", "", ipaddress.ip_network(address), port)


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a run asked to connect: a normalized name, or an IP literal."""

    host: str  # the name in normal form, or the address as text
    address: IPAddress | None
    port: int

    def __str__(self) -> str:
        if self.address is not None and self.address.version == 6:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"


def destination(host: str, port: int) -> Destination:
    """A run's requested destination, strictly: a host name or an IP literal (IPv6 possibly
    in brackets), and a port within 1..65535. Anything an address parser might read as a
    number is refused rather than resolved."""
    if not 1 <= port <= 65535:
        raise AllowlistError(f"port {port} is not within 1..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            raise AllowlistError("brackets are for IPv6 only")
    if ":" in host or _looks_numeric(host):
        # An IPv4-mapped address is the IPv4 address it carries: IPv4 entries decide it
        # (``[::ffff:127.0.0.1]`` is 127.0.0.1, which an IPv6 entry such as ::/0 never names).
        address = delivered(ip_address(host))
        return Destination(str(address), address, port)
    return Destination(host_name(host), None, port)


Reason = Literal["not-allowed", "port", "ip-literal"]


@dataclass(frozen=True, slots=True)
class Allowlist:
    """A parsed allowlist; ``entries`` keep the policy's order."""

    entries: tuple[Entry, ...]

    def __str__(self) -> str:
        return ", ".join(str(e) for e in self.entries)

    def match(self, dest: Destination) -> Entry | Reason:
        """The entry that allows a destination, or why none does: ``port`` when entries name
        the host on other ports, ``ip-literal`` for an address no IP or CIDR entry covers."""
        if dest.address is not None:
            covering = [e for e in self.entries if e.covers_address(dest.address)]
            allowed = next((e for e in covering if e.allows_port(dest.port)), None)
            return allowed or ("port" if covering else "ip-literal")
        naming = [e for e in self.entries if e.names(dest.host)]
        allowed = next((e for e in naming if e.allows_port(dest.port)), None)
        return allowed or ("port" if naming else "not-allowed")

    def covering(self, address: IPAddress, port: int) -> Entry | None:
        """The IP or CIDR entry that names an address on a port, if any."""
        return next(
            (e for e in self.entries if e.covers_address(address) and e.allows_port(port)), None
        )

    def subset(self, requested: Sequence[Entry]) -> list[int]:
        """Indexes of the requested entries this allowlist does not cover."""
        return [i for i, r in enumerate(requested) if not any(e.covers(r) for e in self.entries)]


def parse_allowlist(texts: Iterable[str]) -> tuple[Allowlist, list[tuple[int, str]]]:
    """Parse entries; the allowlist of the good ones and (index, message) for every bad one,
    duplicates included (an entry written twice is a mistake worth a line)."""
    entries: list[Entry] = []
    errors: list[tuple[int, str]] = []
    seen: dict[Entry, int] = {}
    for i, text in enumerate(texts):
        try:
            entry = parse_entry(text)
        except AllowlistError as exc:
            errors.append((i, str(exc)))
            continue
        if entry in seen:
            errors.append((i, f"{text!r} repeats entry [{seen[entry]}]"))
            continue
        seen[entry] = i
        entries.append(entry)
    return Allowlist(tuple(entries)), errors
