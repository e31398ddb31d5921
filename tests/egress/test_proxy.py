"""The egress proxy on its own, in the test network (netlab.py): a run's namespace with
nothing but the proxy's listener, real clients (curl, Python, raw sockets) inside it, real
servers in a remote namespace whose accept log shows what reached them.

Each attack is tried from inside the run's namespace and the test checks that it failed, that
the proxy reported it with the right reason, and that no server saw a connection for it.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from roboz_helper.egress.report import MAX_LISTED, NetworkReport

from .netlab import METADATA, OTHER, PRIVATE, REMOTE, WORLD_ADDRESS, Lab, RunNet

SERVERS_HIT = {
    "files",
    "files-tls",
    "other",
    "other-tls",
    "private",
    "private-tls",
    "metadata",
    "metadata-tls",
    "world-loopback",
    "echo",
}


def _connections(lab: Lab) -> list[tuple[str, str]]:
    """What reached a server since the last call, DNS queries (the proxy's own) left out."""
    return [(server, peer) for server, peer in lab.log.take() if not server.startswith("dns")]


def _ok(result: object) -> str:
    assert getattr(result, "returncode", None) == 0, result
    return str(result.stdout.decode())  # type: ignore[attr-defined]


def _reasons(report: NetworkReport) -> list[tuple[str, int, str]]:
    return [(r.host, r.port, r.reason) for r in report.refusals]


def _python(run: RunNet, body: str) -> dict[str, object]:
    """Run a Python snippet in the run's namespace; it prints one JSON object."""
    result = run.py(textwrap.dedent(body).replace("CA_PATH", repr(str(run.lab.ca.path))))
    return json.loads(_ok(result))  # type: ignore[no-any-return]


def test_allowed_hosts_over_http_https_and_from_python(lab: Lab) -> None:
    lab.log.take()
    with lab.run(["files.remote.test", "alias.remote.test:443"]) as run:
        assert "hello from files (Host: files.remote.test, path /a)" in _ok(
            run.sh("curl -sS --fail http://files.remote.test/a")
        )
        assert "hello from files-tls" in _ok(run.sh("curl -sS --fail https://files.remote.test/b"))
        # Allowed by its own name, whatever it is a CNAME of.
        assert "Host: alias.remote.test" in _ok(
            run.sh("curl -sS --fail https://alias.remote.test/")
        )
        got = _python(
            run,
            """
            import json, urllib.request
            with urllib.request.urlopen("https://files.remote.test/py") as r:
                body = r.read().decode()
            with urllib.request.urlopen("http://files.remote.test/plain") as r:
                plain = r.read().decode()
            print(json.dumps({"body": body, "plain": plain}))
        """,
        )
        assert "path /py" in str(got["body"]) and "path /plain" in str(got["plain"])
        report = run.finish()
    assert report.refusals == () and report.refused == 0
    assert report.connections == 5
    assert report.bytes_out > 0 and report.bytes_in > report.bytes_out
    reached = _connections(lab)
    assert sorted({s for s, _ in reached}) == ["files", "files-tls"]
    assert {peer for _, peer in reached} == {WORLD_ADDRESS}  # only ever the proxy


def test_socks5_and_raw_tcp_tunnels(lab: Lab) -> None:
    lab.log.take()
    with lab.run(["files.remote.test"]) as run:
        assert "hello from files-tls" in _ok(
            run.sh("curl -sS --fail --proxy socks5h://127.0.0.1:3128 https://files.remote.test/s")
        )
        got = _python(
            run,
            """
            import json, socket
            def socks(host, port):
                s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
                s.sendall(b"\\x05\\x01\\x00")
                assert s.recv(2) == b"\\x05\\x00"
                name = host.encode()
                s.sendall(b"\\x05\\x01\\x00\\x03" + bytes([len(name)]) + name + port.to_bytes(2, "big"))
                return s, s.recv(10)
            def connect(host, port):
                s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
                s.sendall(f"CONNECT {host}:{port} HTTP/1.1\\r\\n\\r\\n".encode())
                return s, s.recv(1024)
            out = {}
            for how in (socks, connect):
                s, reply = how("files.remote.test", 7)
                s.sendall(b"ping " + how.__name__.encode())
                s.shutdown(socket.SHUT_WR)  # a half-close reaches the echo server
                data = b""
                while chunk := s.recv(100):
                    data += chunk
                out[how.__name__] = [reply[:12].decode("latin-1"), data.decode()]
            print(json.dumps(out))
        """,
        )
        report = run.finish()
    assert got["socks"] == ["\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00", "ping socks"]
    assert str(got["connect"][0]).startswith("HTTP/1.1 200")  # type: ignore[index]
    assert got["connect"][1] == "ping connect"  # type: ignore[index]
    assert report.connections == 3 and report.refusals == ()
    assert {peer for _, peer in _connections(lab)} == {WORLD_ADDRESS}


def test_a_10_mb_download(lab: Lab) -> None:
    size = 10 << 20
    with lab.run(["files.remote.test:443"]) as run:
        out = _ok(
            run.sh(
                f"curl -sS --fail -o /dev/null -w '%{{size_download}}' "
                f"https://files.remote.test/bytes/{size}"
            )
        )
        report = run.finish()
    assert int(out) == size
    assert report.bytes_in > size  # the body, its TLS framing and the handshake


# Sends one request head to the proxy, prints the answer, fails.
RAW = (
    "printf '%s\\r\\n\\r\\n' | python3 -c 'import socket,sys; "
    's=socket.create_connection(("127.0.0.1",3128)); s.sendall(sys.stdin.buffer.read()); '
    "print(s.recv(300)); sys.exit(1)'"
)

# A SOCKS5 request with another command than CONNECT (%d: 2 BIND, 3 UDP ASSOCIATE).
SOCKS = (
    'python3 -c \'import socket,sys; s=socket.create_connection(("127.0.0.1",3128)); '
    's.sendall(b"\\x05\\x01\\x00"); s.recv(2); '
    's.sendall(b"\\x05\\x0%d\\x00\\x03\\x11files.remote.test\\x00\\x35"); '
    "print(s.recv(10)); sys.exit(1)'"
)

# Each case: the allowlist, a command run in the run's namespace (it must fail), and the
# refusal the proxy must report (host, port, reason).
REFUSED = [
    (
        "another-host",
        ["files.remote.test"],
        "curl -sS --fail http://other.remote.test/",
        ("other.remote.test", 80, "not-allowed"),
    ),
    (
        "another-port",
        ["files.remote.test:443"],
        "curl -sS --fail http://files.remote.test/",
        ("files.remote.test", 80, "port"),
    ),
    (
        "ip-literal-of-the-allowed-host",
        ["files.remote.test"],
        f"curl -sS --fail http://{REMOTE}/",
        (REMOTE, 80, "ip-literal"),
    ),
    (
        "ip-literal-over-https",
        ["files.remote.test"],
        f"curl -sS --fail -k https://{REMOTE}/",
        (REMOTE, 443, "ip-literal"),
    ),
    (
        "name-resolving-to-loopback",
        ["rebind.remote.test"],
        "curl -sS --fail http://rebind.remote.test/",
        ("rebind.remote.test", 80, "address"),
    ),
    (
        "name-resolving-to-metadata",
        ["metadata.remote.test"],
        "curl -sS --fail http://metadata.remote.test/",
        ("metadata.remote.test", 80, "address"),
    ),
    (
        "metadata-address",
        ["files.remote.test"],
        f"curl -sS --fail http://{METADATA}/latest/",
        (METADATA, 80, "ip-literal"),
    ),
    (
        "name-resolving-to-private",
        ["private.remote.test"],
        "curl -sS --fail http://private.remote.test/",
        ("private.remote.test", 80, "address"),
    ),
    (
        "the-proxy-asked-directly",
        ["files.remote.test"],
        "curl -sS --fail http://127.0.0.1:3128/",
        ("", 0, "malformed"),
    ),
    (
        "the-proxys-own-address",
        ["files.remote.test"],
        "curl -sS --fail --noproxy '' http://127.0.0.1:3128/",
        ("127.0.0.1", 3128, "ip-literal"),
    ),
    (
        "the-proxys-own-address-connect",
        ["files.remote.test"],
        "curl -sS --fail --noproxy '' -p http://127.0.0.1:3128/",
        ("127.0.0.1", 3128, "ip-literal"),
    ),
    (
        "localhost-by-name",
        ["files.remote.test"],
        "curl -sS --fail --noproxy '' http://localhost:22/",
        ("localhost", 22, "not-allowed"),
    ),
    (
        "socks-to-another-host",
        ["files.remote.test"],
        "curl -sS --fail --proxy socks5h://127.0.0.1:3128 http://other.remote.test/",
        ("other.remote.test", 80, "not-allowed"),
    ),
    (
        "socks-by-address",
        ["files.remote.test"],
        f"curl -sS --fail --proxy socks5://127.0.0.1:3128 http://{REMOTE}/",
        (REMOTE, 80, "ip-literal"),
    ),
    # Forms an address parser reads as 127.0.0.1 (curl itself would normalize them first).
    (
        "numeric-host",
        ["files.remote.test"],
        RAW % "GET http://0x7f000001/ HTTP/1.1",
        ("", 0, "malformed"),
    ),
    (
        "short-numeric-host",
        ["files.remote.test"],
        RAW % "CONNECT 127.1:80 HTTP/1.1",
        ("", 0, "malformed"),
    ),
    (
        "decimal-host",
        ["files.remote.test"],
        RAW % "CONNECT 2130706433:80 HTTP/1.1",
        ("", 0, "malformed"),
    ),
    (
        "https-url-forwarded-in-plain",
        ["files.remote.test"],
        RAW % "GET https://files.remote.test/ HTTP/1.1",
        ("", 0, "malformed"),
    ),
    (
        "socks4",
        ["files.remote.test"],
        "curl -sS --fail --proxy socks4a://127.0.0.1:3128 http://files.remote.test/",
        ("", 0, "unsupported"),
    ),
    ("socks-udp-associate", ["files.remote.test"], SOCKS % 3, ("files.remote.test", 53, "unsupported")),
    ("socks-bind", ["files.remote.test"], SOCKS % 2, ("files.remote.test", 53, "unsupported")),
    ("garbage", ["files.remote.test"], RAW % "\\x16\\x03\\x01 not a request", ("", 0, "malformed")),
    # Allowed, but nothing there: reported, and nothing connects.
    ("unknown-name", ["*.remote.test"], "curl -sS --fail http://nothing.remote.test/",
     ("nothing.remote.test", 80, "unresolved")),
    ("nothing-listening", ["files.remote.test"], "curl -sS --fail http://files.remote.test:81/",
     ("files.remote.test", 81, "unreachable")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("allow", "command", "refusal"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused_and_reported(
    lab: Lab, allow: list[str], command: str, refusal: tuple[str, int, str]
) -> None:
    lab.log.take()
    with lab.run(allow) as run:
        result = run.sh(command)
        report = run.finish()
    assert result.returncode != 0, result
    assert refusal in _reasons(report), report
    assert report.connections == 0 and report.bytes_in == 0
    assert _connections(lab) == []  # nothing reached any server


def test_named_private_addresses_are_reachable(lab: Lab) -> None:
    lab.log.take()
    with lab.run(["private.remote.test:80", "10.77.0.0/24:80", "mixed.remote.test"]) as run:
        assert "hello from private " in _ok(run.sh("curl -sS --fail http://private.remote.test/"))
        assert "hello from private " in _ok(run.sh(f"curl -sS --fail http://{PRIVATE}/"))
        # A name resolving to loopback and a public address: only the public one is used.
        assert "hello from files " in _ok(run.sh("curl -sS --fail http://mixed.remote.test/"))
        report = run.finish()
    assert report.refusals == ()
    assert {s for s, _ in _connections(lab)} == {"private", "files"}


def test_the_forwarded_request_names_the_allowed_host_only(lab: Lab) -> None:
    with lab.run(["files.remote.test:80"]) as run:
        out = _ok(run.sh("curl -sS --fail -H 'Host: other.remote.test' http://files.remote.test/h"))
    assert "Host: files.remote.test, path /h" in out


SNI = """
    import json, socket, ssl
    def attempt(sni, tls=True):
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(b"CONNECT files.remote.test:443 HTTP/1.1\\r\\n\\r\\n")
        reply = s.recv(1024).decode()
        try:
            if not tls:
                s.sendall(b"GET / HTTP/1.1\\r\\nHost: files.remote.test\\r\\n\\r\\n")
                return [reply, s.recv(100).decode() or "closed"]
            ctx = ssl.create_default_context(cafile=CA_PATH)
            ctx.check_hostname = False  # the proxy's check is under test, not the client's
            t = ctx.wrap_socket(s, server_hostname=sni)
            t.sendall(b"GET / HTTP/1.1\\r\\nHost: files.remote.test\\r\\nConnection: close\\r\\n\\r\\n")
            return [reply, t.makefile("rb").read().decode()]
        except (OSError, ssl.SSLError) as exc:
            return [reply, type(exc).__name__]
    print(json.dumps({"same": attempt("files.remote.test"), "other": attempt("other.remote.test"),
                      "none": attempt(None), "plain": attempt(None, tls=False)}))
"""


def test_tls_on_443_must_name_the_requested_host(lab: Lab) -> None:
    lab.log.take()
    with lab.run(["files.remote.test:443", "other.remote.test:443"]) as run:
        got = _python(run, SNI)
        report = run.finish()
    assert "hello from files-tls" in str(got["same"][1])  # type: ignore[index]
    for case in ("other", "none", "plain"):
        assert str(got[case][0]).startswith("HTTP/1.1 200"), got  # type: ignore[index]
        assert "hello" not in str(got[case][1]), got  # type: ignore[index]
    reasons = [(r.reason, r.detail) for r in report.refusals]
    assert ("sni", "the ClientHello has server name 'other.remote.test'") in reasons
    assert ("sni", "the ClientHello has no server name") in reasons
    assert ("sni", "not a TLS handshake") in reasons
    # The refused tunnels never reached the remote host: one connection, the allowed one.
    assert _connections(lab) == [("files-tls", WORLD_ADDRESS)]


def test_without_the_proxy_there_is_no_route(lab: Lab) -> None:
    lab.log.take()
    with lab.run(["files.remote.test"]) as run:
        got = _python(
            run,
            f"""
            import errno, json, socket
            out = {{}}
            def attempt(name, fn):
                try:
                    fn(); out[name] = "ok"
                except OSError as e:
                    out[name] = errno.errorcode.get(e.errno, str(e))
            attempt("tcp", lambda: socket.create_connection(("{REMOTE}", 80), timeout=3))
            attempt("tcp-other", lambda: socket.create_connection(("{OTHER}", 443), timeout=3))
            # connect() on a UDP socket only asks for a route: nothing is sent.
            attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(("{REMOTE}", 53)))
            attempt("udp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).connect(("2001:db8::1", 53)))
            attempt("tcp6", lambda: socket.create_connection(("2001:db8::1", 80), timeout=3))
            icmp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            attempt("icmp", lambda: icmp.sendto(b"\\x08\\0\\xf7\\xff\\0\\0\\0\\0", ("{REMOTE}", 0)))
            attempt("dns", lambda: socket.getaddrinfo("files.remote.test", 80))
            print(json.dumps(out))
        """,
        )
        ignoring = run.sh(
            "curl -sS --noproxy '*' -m 5 http://files.remote.test/ "
            f"|| curl -sS --noproxy '*' -m 5 http://{REMOTE}/"
        )
        report = run.finish()
    assert got["tcp"] == got["tcp-other"] == got["udp"] == got["icmp"] == "ENETUNREACH", got
    assert got["udp6"] in ("ENETUNREACH", "EADDRNOTAVAIL") and got["tcp6"] in (
        "ENETUNREACH",
        "EADDRNOTAVAIL",
    ), got
    assert got["dns"] != "ok"
    assert ignoring.returncode != 0  # a tool that ignores the proxy fails closed
    assert report.connections == 0
    assert _connections(lab) == []


def test_the_byte_limit_ends_the_runs_connections(lab: Lab) -> None:
    with lab.run(["files.remote.test"], max_bytes=200_000) as run:
        small = run.sh("curl -sS --fail http://files.remote.test/bytes/1000 | wc -c")
        big = run.sh("curl -sS --fail -o /dev/null https://files.remote.test/bytes/1000000")
        after = run.sh("curl -sS --fail http://files.remote.test/")
        report = run.finish()
    assert _ok(small).strip() == "1000"
    assert big.returncode != 0 and after.returncode != 0
    assert report.bytes_in + report.bytes_out <= 200_000
    # Reported once, against the connection that would have crossed it; every connection
    # after it is refused too.
    assert ("files.remote.test", 443, "byte-limit") in _reasons(report)
    assert ("", 0, "byte-limit") in _reasons(report)


def test_the_connection_limit(lab: Lab) -> None:
    with lab.run(["files.remote.test"], max_connections=2) as run:
        got = _python(
            run,
            """
            import json, socket
            held = []
            for _ in range(2):
                s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
                s.sendall(b"CONNECT files.remote.test:7 HTTP/1.1\\r\\n\\r\\n")
                held.append((s, s.recv(100).decode()))
            third = socket.create_connection(("127.0.0.1", 3128), timeout=10)
            third.sendall(b"CONNECT files.remote.test:7 HTTP/1.1\\r\\n\\r\\n")
            try:
                answer = third.recv(100).decode() or "closed"
            except ConnectionResetError:
                answer = "closed"
            print(json.dumps({"held": [r for _, r in held], "third": answer}))
        """,
        )
        report = run.finish()
    assert all(r.startswith("HTTP/1.1 200") for r in got["held"])  # type: ignore[union-attr]
    assert got["third"] == "closed"
    assert ("", 0, "connection-limit") in _reasons(report)


HOLDER = """
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
s.sendall(b"CONNECT files.remote.test:7 HTTP/1.1\\r\\n\\r\\n")
s.recv(100)
s.sendall(b"x")
assert s.recv(1) == b"x"
print("open", flush=True)
try:
    print("ended", repr(s.recv(10)), flush=True)
except OSError as exc:
    print("ended", type(exc).__name__, flush=True)
"""


def test_closing_the_session_ends_every_connection(lab: Lab) -> None:
    with lab.run(["files.remote.test"]) as run:
        holder = subprocess.Popen(
            ["ip", "netns", "exec", run.ns.name, "python3", "-c", HOLDER],
            stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin"},
        )
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline() == b"open\n"  # a tunnel to the echo server is up
            assert run.report().connections == 1
            run.finish()  # the run ends: its tunnel must end with it
            ended = holder.stdout.readline()
        finally:
            holder.kill()
            holder.wait()
    # The run's end reached the holder as EOF or a reset, not as its 30 s timeout.
    assert ended in (b"ended b''\n", b"ended ConnectionResetError\n"), ended


def test_refusals_are_counted_and_the_list_is_bounded(lab: Lab) -> None:
    names = " ".join(f"http://h{i}.remote.test/" for i in range(MAX_LISTED + 8))
    with lab.run(["files.remote.test"]) as run:
        run.sh(f"for u in {names}; do curl -s $u; done; curl -s http://h0.remote.test/")
        report = run.finish()
    assert report.refused == MAX_LISTED + 9
    assert len(report.refusals) == MAX_LISTED
    assert report.refusals[0].host == "h0.remote.test" and report.refusals[0].count == 2
    assert report.refusals[0].text("lab") == (
        "network: h0.remote.test:80 is not allowed by policy 'lab' (2 attempts)"
    )


def test_32_concurrent_connections_in_one_run(lab: Lab) -> None:
    with lab.run(["files.remote.test:443"]) as run:
        got = _python(
            run,
            """
            import json, threading, urllib.request
            results = []
            barrier = threading.Barrier(32)
            def get(i):
                barrier.wait()
                with urllib.request.urlopen(f"https://files.remote.test/bytes/{200000 + i}", timeout=60) as r:
                    results.append(len(r.read()) - 200000)
            threads = [threading.Thread(target=get, args=(i,)) for i in range(32)]
            for t in threads: t.start()
            for t in threads: t.join()
            print(json.dumps(sorted(results)))
        """,
        )
        report = run.finish()
    assert got == list(range(32))
    assert report.connections == 32 and report.refusals == ()


def test_each_run_has_its_own_counters(lab: Lab) -> None:
    with (
        lab.run(["files.remote.test"], policy="a") as first,
        lab.run(["other.remote.test"], policy="b") as second,
    ):
        _ok(first.sh("curl -sS --fail http://files.remote.test/"))
        assert second.sh("curl -sS --fail http://files.remote.test/").returncode != 0
        one, two = first.finish(), second.finish()
    assert one.connections == 1 and one.refusals == ()
    assert two.connections == 0 and _reasons(two) == [("files.remote.test", 80, "not-allowed")]
    assert two.refusals[0].text(two.policy).endswith("is not allowed by policy 'b'")


def test_git_over_https_through_the_proxy(lab: Lab, tmp_path: Path) -> None:
    lab.log.take()
    clone = tmp_path / "clone"
    with lab.run(["files.remote.test:443"]) as run:
        result = run.sh(f"git clone -q https://files.remote.test/git/repo.git {clone} "
                        f"&& cat {clone}/README")  # fmt: skip
        report = run.finish()
    assert _ok(result) == "served through the proxy\n"
    assert report.refusals == () and report.connections >= 1
    assert {peer for _, peer in _connections(lab)} == {WORLD_ADDRESS}


def test_a_connection_that_never_asks_is_closed_and_reported(lab: Lab) -> None:
    with lab.run(["files.remote.test"], handshake_timeout_s=0.5) as run:
        got = _python(
            run,
            """
            import json, socket, time
            s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
            s.sendall(b"CONNECT files.remote.test:80 HTTP/1.1\\r\\n")  # never finished
            print(json.dumps({"answer": s.recv(100).decode()}))
        """,
        )
        report = run.finish()
    assert got == {"answer": ""}  # closed, no answer
    assert [(r.reason, r.detail) for r in report.refusals] == [
        ("malformed", "the handshake did not complete in time")
    ]


def test_a_run_resolves_a_name_once_for_its_connections(lab: Lab) -> None:
    lab.log.take()
    with lab.run(["files.remote.test", "other.remote.test"]) as run:
        for _ in range(2):
            _ok(run.sh("for i in 1 2 3 4 5; do curl -sS --fail http://files.remote.test/; done"))
        _ok(run.sh("curl -sS --fail http://other.remote.test/"))
        report = run.finish()
    queries = [server for server, _ in lab.log.take() if server.startswith("dns")]
    assert report.connections == 11
    assert len(queries) == 4  # A and AAAA, once for each name
