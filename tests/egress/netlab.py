"""A test network made of namespaces this test process creates, and nothing else.

    run netns (per test)      world netns                  remote netns
    lo: 127.0.0.1:3128  <--   the proxy (a thread of       eth0 11.0.7.2, .3 (two "hosts")
    (the proxy's listener,    this process, in world)      10.77.0.2 (a private host)
    nothing else)             eth0 11.0.7.1, 10.77.0.1 --  169.254.169.254 (a metadata host)
                              lo: 127.0.0.1:80 (a service   DNS on 11.0.7.2:53 (UDP and TCP)
                              on the proxy's own host)      HTTP :80, HTTPS :443, echo :7

The remote hosts use 11.0.7.0/24, a globally routable block, because the proxy refuses
special-purpose ranges unless named; the block exists only inside these namespaces, which
have no link to the host's network. Every server records each connection it accepts (the
accept log), so a test can show that nothing reached a host except through the proxy.
"""

from __future__ import annotations

import asyncio
import ctypes
import http.server
import itertools
import os
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from roboz_helper.egress.allowlist import parse_allowlist
from roboz_helper.egress.endpoint import PROXY_HOST, PROXY_PORT
from roboz_helper.egress.proxy import EgressSession, Limits
from roboz_helper.egress.resolver import DnsResolver

from .certs import TestCA

WORLD_ADDRESS = "11.0.7.1"
REMOTE = "11.0.7.2"  # files.remote.test
OTHER = "11.0.7.3"  # other.remote.test
PRIVATE = "10.77.0.2"  # private.remote.test
METADATA = "169.254.169.254"  # metadata.remote.test
DNS_SERVER = (REMOTE, 53)
NAMES: dict[str, list[tuple[str, str]]] = {
    "files.remote.test": [("A", REMOTE)],
    "other.remote.test": [("A", OTHER)],
    "alias.remote.test": [("CNAME", "files.remote.test")],
    "private.remote.test": [("A", PRIVATE)],
    "metadata.remote.test": [("A", METADATA)],
    "rebind.remote.test": [("A", "127.0.0.1")],
    # Two addresses, one of them loopback: the proxy must use only the other.
    "mixed.remote.test": [("A", "127.0.0.1"), ("A", REMOTE)],
    # More records than a 512-byte UDP answer holds: the resolver must ask again over TCP.
    "many.remote.test": [("A", REMOTE)] + [("A", f"11.0.8.{i}") for i in range(1, 60)],
}
_counter = itertools.count()
T = TypeVar("T")


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd: int, nstype: int) -> None:
    """setns(2) for the calling thread (os.setns exists from Python 3.12 on)."""
    if _libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class NamespaceSockets:
    """Makes sockets inside the test's namespaces from one thread, which enters a namespace
    only for one call and returns to its own (a socket stays in the namespace it was made in,
    whoever holds it later)."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netlab-netns")
        self._home: int | None = None

    def _make(
        self, netns: int, family: int, kind: int, address: tuple[str, int] | None, listen: bool
    ) -> socket.socket:
        if self._home is None:
            self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        setns(netns, CLONE_NEWNET)
        try:
            sock = socket.socket(family, kind | socket.SOCK_CLOEXEC)
        finally:
            setns(self._home, CLONE_NEWNET)
        if address is not None:
            sock.bind(address)
        if listen:
            sock.listen(128)
        return sock

    def make(
        self,
        netns: int,
        family: int = socket.AF_INET,
        kind: int = socket.SOCK_STREAM,
        address: tuple[str, int] | None = None,
        listen: bool = False,
    ) -> socket.socket:
        return self._executor.submit(self._make, netns, family, kind, address, listen).result()

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._home is not None:
            os.close(self._home)


class Netns:
    """A named network namespace (``ip netns add``), removed by close()."""

    def __init__(self, role: str) -> None:
        self.name = f"rbz-{role}-{os.getpid()}-{next(_counter)}"
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        self.fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY | os.O_CLOEXEC)
        self.ip("link", "set", "lo", "up")

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.name, *args], check=True, capture_output=True)

    def exec(
        self,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *argv],
            env=dict(env) if env is not None else {"PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=timeout,
            input=input,
        )

    def close(self) -> None:
        os.close(self.fd)
        subprocess.run(["ip", "netns", "del", self.name], check=False)


@dataclass
class AcceptLog:
    """Every connection (or datagram) a server of the test network received: (server, peer)."""

    entries: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, server: str, peer: str) -> None:
        with self.lock:
            self.entries.append((server, peer))

    def take(self) -> list[tuple[str, str]]:
        with self.lock:
            taken, self.entries = self.entries, []
            return taken


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    label = ""
    git_root = ""

    def do_POST(self) -> None:
        if self.path.startswith("/git/"):
            return self._git()
        self.send_error(404)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return body
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _git(self) -> None:
        """Smart HTTP through ``git http-backend`` (CGI), for the repositories in git_root."""
        path, _, query = self.path[len("/git") :].partition("?")
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": self.git_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "REMOTE_ADDR": self.client_address[0],
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        body = self._body() if self.command == "POST" else b""
        env["CONTENT_LENGTH"] = str(len(body))
        out = subprocess.run(["git", "http-backend"], env=env, input=body, capture_output=True)
        head, _, content = out.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def do_GET(self) -> None:
        if self.path.startswith("/git/"):
            return self._git()
        if self.path.startswith("/bytes/"):
            size = int(self.path.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            while size > 0:
                self.wfile.write(chunk[: min(size, len(chunk))])
                size -= len(chunk)
            return
        host = self.headers.get("Host", "")
        body = f"hello from {self.label} (Host: {host}, path {self.path})\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        sock: socket.socket,
        label: str,
        log: AcceptLog,
        tls: ssl.SSLContext | None,
        git_root: str,
    ) -> None:
        handler = type("Handler", (_Handler,), {"label": label, "git_root": git_root})
        super().__init__(sock.getsockname()[:2], handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.label, self.log, self.tls = label, log, tls

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, peer = self.socket.accept()
        self.log.add(self.label, peer[0])
        if self.tls is not None:
            conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, peer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client the proxy cut off (a refused SNI, a byte limit) is expected


def _serve_echo(sock: socket.socket, label: str, log: AcceptLog) -> None:
    def one(conn: socket.socket, peer: str) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:
                pass
        log.add(label + "-closed", peer)  # the other end went away

    while True:
        try:
            conn, peer = sock.accept()
        except OSError:
            return
        log.add(label, peer[0])
        threading.Thread(target=one, args=(conn, peer[0]), daemon=True).start()


def dns_answer(query: bytes, tcp: bool) -> bytes:
    """The test resolver: answers from NAMES (following its CNAMEs), NXDOMAIN otherwise."""
    ident, _flags = struct.unpack(">HH", query[:4])
    offset, labels = 12, []
    while query[offset]:
        labels.append(query[offset + 1 : offset + 1 + query[offset]].decode())
        offset += 1 + query[offset]
    question = query[12 : offset + 5]
    qtype = struct.unpack(">H", query[offset + 1 : offset + 3])[0]
    name = ".".join(labels).lower()
    answers: list[bytes] = []
    current = name
    for _ in range(4):
        records = NAMES.get(current, [])
        owner = b"".join(bytes([len(p)]) + p.encode() for p in current.split(".")) + b"\0"
        cname = [v for kind, v in records if kind == "CNAME"]
        if cname:
            target = b"".join(bytes([len(p)]) + p.encode() for p in cname[0].split(".")) + b"\0"
            answers.append(owner + struct.pack(">HHIH", 5, 1, 60, len(target)) + target)
            current = cname[0]
            continue
        for kind, value in records:
            if kind == "A" and qtype == 1:
                data = socket.inet_pton(socket.AF_INET, value)
                answers.append(owner + struct.pack(">HHIH", 1, 1, 60, 4) + data)
            elif kind == "AAAA" and qtype == 28:
                data = socket.inet_pton(socket.AF_INET6, value)
                answers.append(owner + struct.pack(">HHIH", 28, 1, 60, 16) + data)
        break
    rcode = 0 if name in NAMES else 3
    flags = 0x8180 | rcode
    body = b"".join(answers)
    if not tcp and 12 + len(question) + len(body) > 512:
        flags |= 0x0200
        answers = []
    header = struct.pack(">HHHHHH", ident, flags, 1, len(answers), 0, 0)
    return header + question + b"".join(answers)


def _serve_dns_udp(sock: socket.socket, log: AcceptLog) -> None:
    while True:
        try:
            query, peer = sock.recvfrom(4096)
        except OSError:
            return
        if peer is None:  # shut down: recvfrom ends with no sender
            return
        log.add("dns-udp", peer[0])
        sock.sendto(dns_answer(query, tcp=False), peer)


def _serve_dns_tcp(sock: socket.socket, log: AcceptLog) -> None:
    while True:
        try:
            conn, peer = sock.accept()
        except OSError:
            return
        log.add("dns-tcp", peer[0])
        with conn:
            (length,) = struct.unpack(">H", conn.recv(2))
            answer = dns_answer(conn.recv(length), tcp=True)
            conn.sendall(struct.pack(">H", len(answer)) + answer)


def make_repository(bare: Path) -> None:
    """A bare repository with one commit (a README), served at /git/repo.git."""
    work = bare.parent / "work"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@test", "-c", "init.defaultBranch=main"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(bare.parent)}
    subprocess.run([*git, "init", "-q", "--bare", str(bare)], check=True, env=env)
    subprocess.run([*git, "init", "-q", str(work)], check=True, env=env)
    (work / "README").write_text("served through the proxy\n")
    for args in (["add", "README"], ["commit", "-q", "-m", "first"],
                 ["push", "-q", str(bare), "HEAD:main"]):  # fmt: skip
        subprocess.run([*git, "-C", str(work), *args], check=True, env=env)


class ProxyLoop:
    """An event loop in a thread that lives in the world namespace: every socket the proxy
    opens (remote connections, DNS queries) is made there."""

    def __init__(self, world: Netns) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            setns(world.fd, CLONE_NEWNET)
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, name="egress-test-proxy", daemon=True)
        self.thread.start()
        ready.wait(10)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Lab:
    """The world and remote namespaces, their servers and the proxy's loop."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.log = AcceptLog()
        self.sockets = NamespaceSockets()
        self._closers: list[Callable[[], None]] = []
        self.world = Netns("w")
        self._closers.append(self.world.close)
        self.remote = Netns("r")
        self._closers.append(self.remote.close)
        self._wire()
        self.ca = TestCA(directory)
        self.git_root = directory / "git"
        make_repository(self.git_root / "repo.git")
        names = [n for n in NAMES] + ["*.remote.test"]
        server_cert = self.ca.issue("remote", names, [REMOTE, OTHER])
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(server_cert.cert, server_cert.key)
        self.tls = tls
        for address, label in (
            (REMOTE, "files"),
            (OTHER, "other"),
            (PRIVATE, "private"),
            (METADATA, "metadata"),
        ):
            self._http(self.remote, address, 80, label, None)
            self._http(self.remote, address, 443, label + "-tls", tls)
        self._http(self.world, "127.0.0.1", 80, "world-loopback", None)
        echo = self.sockets.make(self.remote.fd, address=(REMOTE, 7), listen=True)
        self._thread(_serve_echo, echo, "echo", self.log)
        udp = self.sockets.make(self.remote.fd, kind=socket.SOCK_DGRAM, address=DNS_SERVER)
        self._thread(_serve_dns_udp, udp, self.log)
        tcp = self.sockets.make(self.remote.fd, address=DNS_SERVER, listen=True)
        self._thread(_serve_dns_tcp, tcp, self.log)
        self.proxy = ProxyLoop(self.world)
        self._closers.append(self.proxy.close)
        self.resolver = DnsResolver([DNS_SERVER], timeout_s=5.0)

    def _wire(self) -> None:
        # The veth pair is made in world and its peer moved to remote, so neither end ever
        # appears in the host's namespace.
        self.world.ip(
            "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", self.remote.name
        )
        for address in (f"{REMOTE}/24", f"{OTHER}/24", "10.77.0.2/24", f"{METADATA}/32"):
            self.remote.ip("addr", "add", address, "dev", "eth0")
        for address in (f"{WORLD_ADDRESS}/24", "10.77.0.1/24"):
            self.world.ip("addr", "add", address, "dev", "eth0")
        self.world.ip("link", "set", "eth0", "up")
        self.remote.ip("link", "set", "eth0", "up")
        self.world.ip("route", "add", f"{METADATA}/32", "dev", "eth0")

    def _thread(self, target: Callable[..., None], sock: socket.socket, *args: object) -> None:
        threading.Thread(target=target, args=(sock, *args), daemon=True).start()
        self._closers.append(sock.close)

    def _http(
        self, ns: Netns, address: str, port: int, label: str, tls: ssl.SSLContext | None
    ) -> None:
        sock = self.sockets.make(ns.fd, address=(address, port), listen=True)
        server = _Server(sock, label, self.log, tls, str(self.git_root))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

        def close() -> None:
            server.shutdown()
            server.server_close()

        self._closers.append(close)

    @contextmanager
    def run(self, allow: list[str], policy: str = "lab", **limits: Any) -> Iterator[RunNet]:
        """A run's namespace with a proxy session serving its 127.0.0.1:3128."""
        allowlist, errors = parse_allowlist(allow)
        assert not errors, errors
        ns = Netns("x")
        listener = self.sockets.make(ns.fd, address=(PROXY_HOST, PROXY_PORT), listen=True)
        session = EgressSession(allowlist, self.resolver, policy, Limits(**limits))

        async def start() -> None:
            session.start(listener)

        self.proxy.call(start())
        handle = RunNet(self, ns, session)
        try:
            yield handle
        finally:
            handle.finish()
            ns.close()

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self.sockets.close()


class RunNet:
    """The per-test part: the run's namespace and its proxy session."""

    def __init__(self, lab: Lab, ns: Netns, session: EgressSession) -> None:
        self.lab, self.ns, self.session = lab, ns, session
        self._report: Any = None

    def env(self, **extra: str) -> dict[str, str]:
        from roboz_helper.egress.endpoint import proxy_environment

        return {
            "PATH": "/usr/bin:/bin",
            "HOME": "/nonexistent",
            **proxy_environment(),
            "SSL_CERT_FILE": str(self.lab.ca.path),
            "GIT_SSL_CAINFO": str(self.lab.ca.path),
            **extra,
        }

    def sh(
        self, command: str, proxy: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        env = self.env() if proxy else {"PATH": "/usr/bin:/bin"}
        return self.ns.exec(["/bin/sh", "-c", command], env=env, timeout=timeout)

    def py(
        self, code: str, proxy: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        env = self.env() if proxy else {"PATH": "/usr/bin:/bin"}
        return self.ns.exec(["/usr/bin/python3", "-c", code], env=env, timeout=timeout)

    def report(self) -> Any:
        return self.lab.proxy.call(_report(self.session))

    def finish(self) -> Any:
        if self._report is None:
            self._report = self.lab.proxy.call(self.session.close())
        return self._report


async def _report(session: EgressSession) -> Any:
    return session.report()
