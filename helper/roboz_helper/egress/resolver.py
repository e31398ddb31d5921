"""Name resolution for the proxy: the run has no resolver of its own, the helper resolves.

Two resolvers, one interface (``await resolver.resolve(name)`` -> addresses, IPv4 first):

- ``SystemResolver``: the host's own (``getaddrinfo``: /etc/hosts, nsswitch, resolv.conf),
  the default;
- ``DnsResolver``: asks the name servers the policy's ``[egress] nameservers`` lists, over UDP
  (TCP when the answer is truncated), A and AAAA at once, following CNAMEs inside the answer.
  For a helper whose host resolver must not be used for runs, and for tests, which point it
  at a resolver they run themselves.

Either way the proxy connects to the exact addresses it checked: nothing resolves a name a
second time between the check and the connection.

Standard library only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import struct
from collections.abc import Sequence
from typing import Final, Protocol

from roboz_helper.egress.addresses import IPAddress

MAX_ADDRESSES: Final = 16
_A, _AAAA, _CNAME = 1, 28, 5
_HEADER = struct.Struct(">HHHHHH")
_RR = struct.Struct(">HHIH")


class ResolveError(Exception):
    """The name has no usable answer; the message says why, in one line."""


class Resolver(Protocol):
    async def resolve(self, name: str) -> list[IPAddress]: ...


def _order(addresses: Sequence[IPAddress]) -> list[IPAddress]:
    unique = list(dict.fromkeys(addresses))
    return ([a for a in unique if a.version == 4] + [a for a in unique if a.version == 6])[
        :MAX_ADDRESSES
    ]


class SystemResolver:
    def __init__(self, timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s

    async def resolve(self, name: str) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(name, None, type=socket.SOCK_STREAM), self.timeout_s
            )
        except TimeoutError:
            raise ResolveError("the resolver did not answer in time") from None
        except socket.gaierror as exc:
            raise ResolveError(exc.strerror or "no address") from None
        found: list[IPAddress] = []
        for family, _, _, _, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                # A link-local IPv6 answer carries its zone ("fe80::1%eth0"): drop it.
                found.append(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]))
        return _order(found)


# --- the DNS client ------------------------------------------------------------------------------


def _query(name: str, qtype: int) -> tuple[int, bytes]:
    ident = int.from_bytes(os.urandom(2), "big")
    labels = b"".join(bytes([len(part)]) + part.encode("ascii") for part in name.split("."))
    # Flags 0x0100: a standard query, recursion desired.
    return ident, _HEADER.pack(ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(
        ">HH", qtype, 1
    )


def _read_name(msg: bytes, offset: int) -> tuple[str, int]:
    """A (possibly compressed) name at offset; the offset after it in the record."""
    labels: list[str] = []
    end = -1
    jumps = 0
    while True:
        if offset >= len(msg):
            raise ResolveError("a malformed answer (name past the end)")
        length = msg[offset]
        if length & 0xC0 == 0xC0:
            if offset + 1 >= len(msg) or jumps > 32:
                raise ResolveError("a malformed answer (compression)")
            if end < 0:
                end = offset + 2
            offset = ((length & 0x3F) << 8) | msg[offset + 1]
            jumps += 1
            continue
        if length & 0xC0:
            raise ResolveError("a malformed answer (label type)")
        offset += 1
        if length == 0:
            break
        labels.append(msg[offset : offset + length].decode("ascii", "replace").lower())
        offset += length
    return ".".join(labels), (end if end >= 0 else offset)


def parse_answer(msg: bytes, ident: int, name: str, qtype: int) -> tuple[int, list[IPAddress]]:
    """The response code and the addresses of ``name`` (through CNAMEs) in a response to the
    query ``ident``; ResolveError for anything that is not that response."""
    if len(msg) < _HEADER.size:
        raise ResolveError("a truncated answer")
    rid, flags, qdcount, ancount, _, _ = _HEADER.unpack_from(msg)
    if rid != ident or not flags & 0x8000 or qdcount != 1:
        raise ResolveError("an answer to another question")
    qname, offset = _read_name(msg, _HEADER.size)
    if qname != name or msg[offset : offset + 4] != struct.pack(">HH", qtype, 1):
        raise ResolveError("an answer to another question")
    offset += 4
    aliases: dict[str, str] = {}
    found: dict[str, list[IPAddress]] = {}
    for _ in range(ancount):
        owner, offset = _read_name(msg, offset)
        if offset + _RR.size > len(msg):
            raise ResolveError("a truncated answer")
        rtype, rclass, _, length = _RR.unpack_from(msg, offset)
        offset += _RR.size
        data = msg[offset : offset + length]
        if len(data) != length:
            raise ResolveError("a truncated answer")
        if rclass == 1 and rtype == _CNAME:
            aliases[owner] = _read_name(msg, offset)[0]
        elif rclass == 1 and rtype == qtype and length == (4 if qtype == _A else 16):
            found.setdefault(owner, []).append(ipaddress.ip_address(data))
        offset += length
    current = name
    for _ in range(8):  # a CNAME chain longer than that is a loop or an attack
        if current not in aliases:
            break
        current = aliases[current]
    return flags & 0xF, found.get(current, [])


class _Datagram(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: object) -> None:
        if not self.answer.done():
            self.answer.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc)


class DnsResolver:
    """A stub resolver asking the given servers in turn ((address, port) pairs)."""

    def __init__(self, servers: Sequence[tuple[str, int]], timeout_s: float = 5.0) -> None:
        if not servers:
            raise ValueError("DnsResolver needs at least one server")
        self.servers = tuple(servers)
        self.timeout_s = timeout_s

    async def resolve(self, name: str) -> list[IPAddress]:
        why = "no server answered"
        per_server = self.timeout_s / len(self.servers)
        for server in self.servers:
            try:
                async with asyncio.timeout(per_server):
                    results = await asyncio.gather(
                        self._ask(server, name, _A), self._ask(server, name, _AAAA)
                    )
            except TimeoutError:
                why = "the resolver did not answer in time"
                continue
            except (OSError, ResolveError) as exc:
                why = str(exc) if isinstance(exc, ResolveError) else exc.strerror or str(exc)
                continue
            codes = {code for code, _ in results}
            addresses = [a for _, found in results for a in found]
            if addresses:
                return _order(addresses)
            if codes <= {0, 3}:  # NOERROR without records, or NXDOMAIN: an answer
                raise ResolveError("no such name" if 3 in codes else "no address for the name")
            why = f"the resolver failed (rcode {max(codes)})"
        raise ResolveError(why)

    async def _ask(
        self, server: tuple[str, int], name: str, qtype: int
    ) -> tuple[int, list[IPAddress]]:
        ident, query = _query(name, qtype)
        loop = asyncio.get_running_loop()
        # A connected socket: the kernel drops datagrams from anyone but the server.
        transport, proto = await loop.create_datagram_endpoint(_Datagram, remote_addr=server)
        try:
            transport.sendto(query)
            while True:
                msg = await proto.answer
                try:
                    code, found = parse_answer(msg, ident, name, qtype)
                except ResolveError:
                    # Not the answer (a stray or forged datagram): keep waiting for it.
                    proto.answer = loop.create_future()
                    continue
                if _HEADER.unpack_from(msg)[1] & 0x0200:  # truncated: ask again over TCP
                    return await self._ask_tcp(server, name, qtype)
                return code, found
        finally:
            transport.close()

    async def _ask_tcp(
        self, server: tuple[str, int], name: str, qtype: int
    ) -> tuple[int, list[IPAddress]]:
        ident, query = _query(name, qtype)
        reader, writer = await asyncio.open_connection(*server)
        try:
            writer.write(struct.pack(">H", len(query)) + query)
            (length,) = struct.unpack(">H", await reader.readexactly(2))
            return parse_answer(await reader.readexactly(length), ident, name, qtype)
        except asyncio.IncompleteReadError:
            raise ResolveError("the resolver closed the connection") from None
        finally:
            writer.close()
