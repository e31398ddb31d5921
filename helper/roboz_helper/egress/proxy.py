"""One run's egress proxy: a listening socket in the run's network namespace, served by the
helper's event loop outside the sandbox.

Per connection the run makes to it, the proxy reads one handshake (HTTP CONNECT, an
absolute-form HTTP request, or SOCKS5), decides, and either answers with a refusal or opens
the remote connection and copies bytes both ways (relay.py). Deciding is, in order:

1. the destination parses strictly (allowlist.destination): a host name or an IP literal;
2. an allowlist entry allows it (a name entry the name, an IP or CIDR entry the address) on
   that port, else ``not-allowed``, ``port`` or ``ip-literal``;
3. a name is resolved here (resolver.py); of its addresses only globally routable ones are
   used, or special-purpose ones an IP or CIDR entry names (addresses.py), else ``address``;
4. a tunnel to a name on port 443 must start with a TLS ClientHello whose server name is that
   name, else ``sni``; the remote connection is opened only after that check, so nothing of a
   refused tunnel reaches the remote host;
5. the run's byte limit and connection limit.

What a run asks, per protocol, is frontends.py's. Every refusal is counted with its host,
port, reason and the entry involved (report.py). ``close()`` ends every connection of the run
and returns the report. Standard library and msgspec only.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from dataclasses import dataclass

import msgspec

from roboz_helper.egress import handshakes as hs
from roboz_helper.egress.addresses import (
    NEVER,
    IPAddress,
    carried_ipv4,
    is_local,
    special_range,
)
from roboz_helper.egress.allowlist import Allowlist, AllowlistError, Destination, Entry, host_name
from roboz_helper.egress.endpoint import take_listener
from roboz_helper.egress.frontends import Ask, Client, Closed, Refused, read_request
from roboz_helper.egress.relay import Tunnel
from roboz_helper.egress.report import MAX_LISTED, NetworkReport, Refusal, RefusalReason
from roboz_helper.egress.resolver import ResolveError, Resolver

log = logging.getLogger(__name__)
# How long a run's proxy keeps a name's addresses (at most; the resolver's own caching aside).
RESOLVED_FOR_S = 30.0
# How many names' answers a run's proxy keeps: a run asking for endless distinct names (a
# wildcard entry allows them) must not grow the helper without bound.
MAX_RESOLVED = 512


@dataclass(frozen=True, slots=True)
class Limits:
    max_bytes: int | None = None  # both directions together, per run
    max_connections: int = 64  # open at once, handshakes included
    # From accepting a connection to its tunnel: the run's request, the name's resolution
    # and the connection to the remote host together.
    handshake_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0


class EgressSession:
    """The proxy of one run. ``start(listener)`` serves a listening TCP socket (made in the
    run's network namespace); ``close()`` ends it and everything it opened."""

    def __init__(
        self, allowlist: Allowlist, resolver: Resolver, policy: str, limits: Limits = Limits()
    ) -> None:
        self.allowlist = allowlist
        self.resolver = resolver
        self.policy = policy
        self.limits = limits
        self._bytes = [0, 0]  # in, out
        self._connections = 0
        self._refused = 0
        self._refusals: dict[tuple[str, int, str, str, str], Refusal] = {}
        self._open = 0
        self._spent = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._tunnels: set[Tunnel] = set()
        self._accepting: asyncio.Task[None] | None = None
        self._closed = False
        self._resolved: dict[str, tuple[float, asyncio.Future[list[IPAddress]]]] = {}
        self._listener: socket.socket | None = None

    # --- the run's limits and the report ---------------------------------------------------

    def passes(self, dest: Destination, outbound: bool, size: int) -> bool:
        limit = self.limits.max_bytes
        if self._spent or (limit is not None and sum(self._bytes) + size > limit):
            if not self._spent:
                self._spent = True
                spent = Refused("byte-limit", dest.host, dest.port, detail=f"{limit} bytes")
                self._refuse(spent.refusal)
                for tunnel in list(self._tunnels):
                    tunnel.abort()
            return False
        self._bytes[outbound] += size
        return True

    def overrun(self, dest: Destination, detail: str) -> None:
        self._refuse(Refused("malformed", dest.host, dest.port, detail=detail).refusal)

    def _refuse(self, refusal: Refusal) -> None:
        self._refused += 1
        key = (refusal.host, refusal.port, refusal.reason, refusal.rule, refusal.detail)
        known = self._refusals.get(key)
        if known is not None:
            self._refusals[key] = msgspec.structs.replace(known, count=known.count + 1)
        elif len(self._refusals) < MAX_LISTED:
            self._refusals[key] = refusal
        log.debug("egress refused: %s", refusal.text(self.policy))

    def report(self) -> NetworkReport:
        return NetworkReport(
            policy=self.policy,
            bytes_in=self._bytes[0],
            bytes_out=self._bytes[1],
            connections=self._connections,
            refused=self._refused,
            refusals=tuple(self._refusals.values()),
        )

    # --- lifetime --------------------------------------------------------------------------

    def attach(self, pidfd: int) -> None:
        """Serve the listener the run's pid 1 (``pidfd``) made in the run's namespace."""
        self.start(take_listener(pidfd))

    def start(self, listener: socket.socket) -> None:
        if self._closed:  # the run ended before its pid 1 was reached
            listener.close()
            return
        listener.setblocking(False)
        self._listener = listener
        self._accepting = asyncio.get_running_loop().create_task(self._accept(listener))

    async def close(self) -> NetworkReport:
        """Stop accepting, end every connection of the run (handshakes and tunnels), and
        return the report. Idempotent."""
        self._closed = True
        if self._accepting is not None:
            # Cancelled and awaited before the listener closes: the loop must stop watching a
            # descriptor before it is closed (and its number reused).
            self._accepting.cancel()
            await asyncio.wait([self._accepting])
        if self._listener is not None:
            self._listener.close()
        for task in list(self._tasks):
            task.cancel()
        for tunnel in list(self._tunnels):
            tunnel.abort()
        for _, resolving in self._resolved.values():
            resolving.cancel()
        waiting = [*self._tasks, *(t.done for t in self._tunnels)]
        if waiting:
            await asyncio.wait(waiting)
        return self.report()

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except (ConnectionAbortedError, InterruptedError):
                continue
            except OSError as exc:  # out of descriptors: back off rather than spin
                log.warning("egress proxy of policy %r cannot accept: %s", self.policy, exc)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            if self._spent or self._open >= self.limits.max_connections:
                reason: RefusalReason = "byte-limit" if self._spent else "connection-limit"
                self._refuse(Refusal(host="", port=0, reason=reason))
                sock.close()
                continue
            self._open += 1
            task = loop.create_task(self._serve(sock))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, sock: socket.socket) -> None:
        client = Client(sock)
        handed_over = False
        try:
            async with asyncio.timeout(self.limits.handshake_timeout_s):
                tunnel = await self._open_tunnel(client, await read_request(client, self.policy))
            if tunnel is not None:
                handed_over = True
                await tunnel.done
        except Refused as exc:
            self._refuse(exc.refusal)
        except TimeoutError:  # before OSError, of which it is a subclass
            late = "the handshake did not complete in time"
            self._refuse(Refusal(host="", port=0, reason="malformed", detail=late))
        except (Closed, OSError):
            pass
        finally:
            self._open -= 1
            if not handed_over:
                sock.close()

    # --- deciding --------------------------------------------------------------------------

    async def _allowed(self, dest: Destination) -> tuple[Entry, list[IPAddress]]:
        """The entry that allows dest and the addresses the proxy may connect to, or
        Refused saying why not."""
        verdict = self.allowlist.match(dest)
        if isinstance(verdict, str):
            raise Refused(verdict, dest.host, dest.port, detail=_why(verdict, self.allowlist, dest))
        if dest.address is not None:
            kind = special_range(dest.address)
            if kind in NEVER:
                raise Refused("address", dest.host, dest.port, str(verdict), f"a {kind} address")
            inner = carried_ipv4(dest.address)
            if kind is not None and inner is not None and not self._usable(dest.address, dest.port):
                # NAT64 or 6to4 in front of a special-purpose IPv4 address: an IPv6 entry
                # (::/0) does not name what a translator delivers it to.
                raise Refused(
                    "address", dest.host, dest.port, str(verdict), f"carries the {kind} {inner}"
                )
            return verdict, [dest.address]
        try:
            found = await self._resolve(dest.host)
        except ResolveError as exc:
            raise Refused("unresolved", dest.host, dest.port, str(verdict), str(exc)) from None
        usable = [a for a in found if self._usable(a, dest.port)]
        if not usable:
            ranges = ", ".join(f"{a} ({_special(a)})" for a in found[:4])
            raise Refused(
                "address",
                dest.host,
                dest.port,
                str(verdict),
                f"resolves only to addresses no entry names: {ranges}",
            )
        return verdict, usable

    async def _resolve(self, name: str) -> list[IPAddress]:
        """The name's addresses, asked for once per RESOLVED_FOR_S within the run: a run
        opening 32 connections to one host resolves it once (the checks are made on every
        connection all the same). A failure is not kept."""
        now = time.monotonic()
        known = self._resolved.get(name)
        failed = (
            known is not None
            and known[1].done()
            and (known[1].cancelled() or known[1].exception() is not None)
        )
        if known is None or known[0] < now or failed:
            self._resolved.pop(name, None)
            if len(self._resolved) >= MAX_RESOLVED:
                self._make_room(now)
            resolving = asyncio.ensure_future(self.resolver.resolve(name))
            resolving.add_done_callback(lambda done: self._forget_failure(name, done))
            known = self._resolved[name] = (now + RESOLVED_FOR_S, resolving)
        return list(await asyncio.shield(known[1]))

    def _forget_failure(self, name: str, done: asyncio.Future[list[IPAddress]]) -> None:
        failed = done.cancelled() or done.exception() is not None
        if failed and name in self._resolved and self._resolved[name][1] is done:
            del self._resolved[name]

    def _make_room(self, now: float) -> None:
        """Drop expired answers, then the oldest ones, below MAX_RESOLVED (lookups in flight
        stay: connections wait on them, and close() cancels them)."""
        for name, (until, resolving) in list(self._resolved.items()):
            if len(self._resolved) < MAX_RESOLVED:
                return
            if resolving.done() and until < now:
                del self._resolved[name]
        for name, (_, resolving) in list(self._resolved.items()):
            if len(self._resolved) < MAX_RESOLVED:
                return
            if resolving.done():
                del self._resolved[name]

    def _usable(self, address: IPAddress, port: int) -> bool:
        """Whether a name's address may be connected to: globally routable and not this
        host's own, or named by an IP or CIDR entry (for an IPv6 address carrying an IPv4
        one, an entry naming that IPv4 address)."""
        kind = _special(address)
        if kind is None:
            return True
        named = carried_ipv4(address) or address
        return kind not in NEVER and self.allowlist.covering(named, port) is not None

    async def _connect(
        self, dest: Destination, entry: Entry, addresses: list[IPAddress]
    ) -> socket.socket:
        loop = asyncio.get_running_loop()
        problem = "no address"
        try:
            async with asyncio.timeout(self.limits.connect_timeout_s):
                for address in addresses:
                    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
                    sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
                    sock.setblocking(False)
                    try:
                        await loop.sock_connect(sock, (str(address), dest.port))
                    except OSError as exc:
                        sock.close()
                        problem = (
                            f"{address}: {exc.strerror or errno.errorcode.get(exc.errno or 0)}"
                        )
                        continue
                    except BaseException:
                        sock.close()
                        raise
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    return sock
        except TimeoutError:
            problem = "timed out"
        raise Refused("unreachable", dest.host, dest.port, str(entry), problem)

    async def _open_tunnel(self, client: Client, ask: Ask) -> Tunnel | None:
        """Decide, connect and hand both sockets to a Tunnel; the refusal answer if not."""
        dest = ask.dest
        replied = False
        try:
            entry, addresses = await self._allowed(dest)
            if dest.port == 443 and dest.address is None:
                # The name is checked against the ClientHello before anything reaches it.
                await client.send(ask.ok)
                replied = True
                await self._check_sni(client, dest, entry)
                remote = await self._connect(dest, entry, addresses)
            else:
                remote = await self._connect(dest, entry, addresses)
                try:
                    await client.send(ask.ok)
                except BaseException:
                    remote.close()
                    raise
        except Refused as exc:
            if not replied:  # after a success reply, the run's side is TLS: just close it
                with contextlib.suppress(OSError):
                    await client.send(ask.refused(exc.refusal))
            raise
        return await self._tunnel(client, remote, ask, client.take(len(client.buffer)))

    async def _tunnel(
        self, client: Client, remote: socket.socket, ask: Ask, first: bytes
    ) -> Tunnel | None:
        dest = ask.dest
        tunnel = Tunnel(self, dest, ask.framing)
        first = tunnel.frame(first)
        if not self.passes(dest, True, len(first)):
            remote.close()
            return None
        try:
            await tunnel.start(client.sock, remote, first)
        except BaseException:
            tunnel.abort()
            remote.close()
            raise
        self._tunnels.add(tunnel)
        tunnel.done.add_done_callback(lambda _: self._tunnels.discard(tunnel))
        self._connections += 1
        return tunnel

    async def _check_sni(self, client: Client, dest: Destination, entry: Entry) -> None:
        while True:
            try:
                hello = hs.client_hello(client.buffer)
            except hs.HandshakeError as exc:
                raise Refused("sni", dest.host, dest.port, str(entry), str(exc)) from None
            if hello is not None:
                break
            await client.more()
        name = hello.server_name
        try:
            same = name is not None and host_name(name) == dest.host
        except AllowlistError:
            same = False
        if not same:
            said = "no server name" if name is None else f"server name {name[:80]!r}"
            raise Refused("sni", dest.host, dest.port, str(entry), f"the ClientHello has {said}")


def _special(address: IPAddress) -> str | None:
    """The special-purpose range of an address, "local" for one of the helper host's own
    addresses (reached over its loopback, whatever the range), or None."""
    return special_range(address) or ("local" if is_local(address) else None)


def _why(reason: str, allowlist: Allowlist, dest: Destination) -> str:
    if reason == "port":
        ports = sorted(
            {
                str(e.port)
                for e in allowlist.entries
                if e.port is not None
                and (
                    e.names(dest.host)
                    or (dest.address is not None and e.covers_address(dest.address))
                )
            }
        )
        return f"allowed on port {', '.join(ports)} only"
    if reason == "ip-literal":
        return "an IP address; only names (or IP and CIDR entries) are allowed"
    return ""
