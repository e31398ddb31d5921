"""``roboz serve`` under load, on loopback: a real server process, raw-socket clients.

1. Append-to-client latency of a delta over SSE with 200 connected stream clients on one
   thread (targets, issue 27: p50 <= 5 ms, p99 <= 25 ms), beside one lone client in the same
   run. The scripted endpoint stamps each streamed piece with ``time.monotonic_ns()`` when it
   hands it to the run (which appends it to the thread at once); a client's latency is the
   time of the read that completed the piece minus that stamp (CLOCK_MONOTONIC is one clock
   for every process here), taken two ways: when the stream clients' reader read it
   ("read"), and when the kernel put it in the client's socket (``SO_TIMESTAMPNS``,
   "arrived"). The reader is ``sse_reader.c``, built here with the C compiler, a process
   that only reads (its CPU per read is printed); without a compiler a Python thread of this
   process reads, which took ~3 ms of CPU per delta to 200 clients on the 2 cores the
   server runs on, and the output says so.
2. 50 concurrent turns with 200 stream clients spread over their threads: no error, no lost
   or duplicated delta (every client's rebuilt thread equals GET of the thread), server RSS.
3. ``GET`` of a thread, requests/s and server CPU per request, against a bare ASGI handler
   returning the same JSON on the same uvicorn (target: <= 1.5x its cost), the two measured
   in alternating turns so that the machine's other load weighs on both alike.

Clients speak HTTP/1.1 over raw sockets (no client library); stream clients are read by a
reader that only keeps each read with its times (epoll), their events parsed after the turn
(``sse_clients.py``). The floor of the SSE fan-out on this machine is measured in the same
run: a bare ASGI app on the same uvicorn pushing a stamped event of a delta's size to 200
streams. Run: ``python -m benchmarks bench_server [--quick]``, or
``python benchmarks/bench_server.py [--quick] [--python-reader]``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from benchmarks.sse_clients import Follower, Reader, choose_reader, parse_event
except ImportError:  # run as a script: benchmarks/ is on sys.path, not the repository
    from sse_clients import (  # type: ignore[no-redef]
        Follower,
        Reader,
        choose_reader,
        parse_event,
    )

REPO = Path(__file__).resolve().parents[1]


# -- the served agent (imported by the server process) -----------------------------------------


def _agents() -> Any:
    import roboz.tools
    from roboz import Agent
    from roboz.llm import Completion, FunctionEndpoint

    class Stamped(FunctionEndpoint):
        """Streams ``pieces`` stamped pieces of a stop's rationale, ``pause_s`` apart; the
        user's message says how many and how far apart: ``PIECES PAUSE_MS``."""

        async def acomplete(self, records: Any, *, on_delta: Any = None, cancel: Any = None) -> Any:
            last = next(r["content"] for r in reversed(records) if r["role"] == "user")
            pieces, pause_ms = (int(x) for x in str(last).split()[:2])
            parts = ['{"action": "stop", "rationale": "']
            if on_delta is not None:
                on_delta(parts[0])
            for _ in range(pieces):
                await asyncio.sleep(pause_ms / 1000)
                piece = f"<{time.monotonic_ns()}> "
                parts.append(piece)
                if on_delta is not None:
                    on_delta(piece)
            parts.append('", "value": "ok"}')
            if on_delta is not None:
                on_delta(parts[-1])
            return Completion(text="".join(parts), model="stamped")

    endpoint = Stamped(lambda records: "", model_name="stamped")
    return Agent("bench", "", agent_endpoint=endpoint, tools=[roboz.tools.stop])


# -- raw HTTP/1.1 over asyncio --------------------------------------------------------------


class Http:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int) -> Http:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
        return cls(reader, writer)

    def send(self, method: str, path: str, token: str, body: Any = None, extra: str = "") -> None:
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n"
        )
        self.writer.write(head.encode() + data)

    async def head(self) -> tuple[int, dict[str, str]]:
        status = int((await self.reader.readline()).split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def response(self) -> tuple[int, bytes]:
        status, headers = await self.head()
        return status, await self.reader.readexactly(int(headers.get("content-length", 0)))

    async def request(self, method: str, path: str, token: str, body: Any = None) -> Any:
        self.send(method, path, token, body)
        status, data = await self.response()
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {data[:200]!r}")
        return json.loads(data) if data else None

    async def events(self) -> Any:
        """SSE events of a chunked response: (name, data) pairs."""
        buffer = b""
        while True:
            size = int((await self.reader.readline()).strip() or b"0", 16)
            if size == 0:
                return
            buffer += await self.reader.readexactly(size + 2)
            buffer = buffer[:-2] if buffer.endswith(b"\r\n") else buffer
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                name, data = parse_event(block)
                if data:
                    yield name, data

    def close(self) -> None:
        self.writer.close()


# -- processes ------------------------------------------------------------------------------


def _start(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        args,
        cwd=cwd,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert process.stderr is not None
    for line in process.stderr:
        found = re.search(r"listening on http://[^:]+:(\d+)", line)
        if found:
            os.set_blocking(process.stderr.fileno(), False)
            return process, int(found.group(1))
    raise RuntimeError("the server did not start")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


BARE = textwrap.dedent(
    """
    import sys, socket
    import uvicorn
    body = open(sys.argv[1], "rb").read()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(2048)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])
    """
)


BARE_SSE = textwrap.dedent(
    """
    import asyncio, sys, socket, time
    import uvicorn
    streams = []
    async def push(pieces, pause):
        for _ in range(pieces):
            await asyncio.sleep(pause / 1000)
            data = b'{"continuation_token":"ct1.x","messages_by_idx":{"1":{"content":[{"text":"<%d> "}]}}}' % time.monotonic_ns()
            event = b"event: delta\\ndata: " + data.ljust(240) + b"\\n\\n"
            for send in list(streams):
                await send({"type": "http.response.body", "body": event, "more_body": True})
        for send in list(streams):
            await send({"type": "http.response.body", "body": b'event: delta\\ndata: {"status":"user_turn"}\\n\\n', "more_body": True})
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        if scope["method"] == "POST":
            body = (await receive())["body"].split()
            asyncio.ensure_future(push(int(body[0]), int(body[1])))
            await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b": connected\\n\\n", "more_body": True})
        streams.append(send)
        while (await receive())["type"] != "http.disconnect":
            pass
        streams.remove(send)
    sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(2048)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])
    """
)
"""The floor of SSE fan-out here: a bare ASGI app on the same uvicorn pushing a stamped
event of a delta's size to every stream, one ``send`` after the other."""


async def _bare_turn(listener: Reader, port: int, pieces: int, clients: int) -> Latencies:
    followers = [listener.follow(port, "bare", "bare", "bare") for _ in range(clients)]
    while not all(f.connected.is_set() for f in followers):
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    http = await Http.connect(port)
    body = b"%d 20" % pieces
    http.writer.write(
        b"POST /go HTTP/1.1\r\nHost: bench\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    await http.response()
    while not all(f.done.is_set() for f in followers):
        await asyncio.sleep(0.02)
    http.close()
    for follower in followers:
        listener.close(follower)
    return _latencies(followers)


# -- the measurements -----------------------------------------------------------------------


Latencies = tuple[list[float], list[float]]
"""Every stamped piece's latency in ms: to when the reader read it, to when it arrived."""


def _latencies(followers: list[Follower]) -> Latencies:
    return (
        [stamp for follower in followers for stamp in follower.stamps()],
        [stamp for follower in followers for stamp in follower.stamps(arrived=True)],
    )


async def _turn(
    listener: Reader, port: int, token: str, pieces: int, pause_ms: int, clients: int
) -> Any:
    http = await Http.connect(port)
    thread = await http.request("POST", "/v1/ai/threads", token, {})
    followers = [
        listener.follow(port, token, thread["thread_id"], thread["continuation_token"])
        for _ in range(clients)
    ]
    while not all(f.connected.is_set() for f in followers):  # every stream connected
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # and idle
    await http.request(
        "POST",
        f"/v1/ai/threads/{thread['thread_id']}/messages",
        token,
        {"text": f"{pieces} {pause_ms}"},
    )
    while not all(f.done.is_set() for f in followers):
        await asyncio.sleep(0.02)
    final = await http.request("GET", f"/v1/ai/threads/{thread['thread_id']}", token)
    http.close()
    results = []
    for follower in followers:
        listener.close(follower)
        results.append(follower.deltas())
    return thread, final, results, _latencies(followers)


def _check(thread: Any, final: Any, results: list[Any]) -> int:
    """Clients whose rebuilt thread differs from GET (lost or duplicated deltas)."""
    from roboz.threads import AgentThreadRecord

    start = AgentThreadRecord.model_validate(thread)
    want = AgentThreadRecord.model_validate(final)
    bad = 0
    for deltas in results:
        held = start
        for delta in deltas:
            held = held.apply_delta(delta)
        if [m.model_dump() for m in held.messages] != [m.model_dump() for m in want.messages]:
            bad += 1
    return bad


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _line(name: str, latencies: Latencies) -> str:
    (read, arrived) = latencies
    return (
        f"  {name:<12} read p50 {_pct(read, 0.5):6.2f} p99 {_pct(read, 0.99):6.2f} ms; "
        f"arrived p50 {_pct(arrived, 0.5):6.2f} p99 {_pct(arrived, 0.99):6.2f} ms"
    )


async def _phase(run: Any, make: Callable[[], Reader]) -> tuple[Any, Reader]:
    # No collection in this process while deltas arrive: a full one (the deltas parsed in an
    # earlier phase are many objects) stalled the Python reader for 100-300 ms, and a read
    # that then takes several events at once dates them all by the last one's arrival.
    gc.collect()
    gc.disable()
    listener = make()
    try:
        return await run(listener), listener
    finally:
        listener.stop()
        gc.enable()


async def _latency(
    port: int, token: str, pieces: int, bare_port: int, make: Callable[[], Reader], reader: str
) -> None:
    (_, _, _, alone), _ = await _phase(lambda li: _turn(li, port, token, pieces, 20, 1), make)
    (thread, final, results, crowd), ours = await _phase(
        lambda li: _turn(li, port, token, pieces, 20, 200), make
    )
    bad = _check(thread, final, results)
    del results
    floor, bare = await _phase(lambda li: _bare_turn(li, bare_port, pieces, 200), make)
    print(
        f"SSE append-to-client latency, {pieces} deltas, pieces 20 ms apart (read: when the "
        "stream clients' reader read it; arrived: the socket's kernel receive timestamp); "
        f"every row's streams read by {reader}:"
    )
    print(_line("1 client:", alone))
    print(_line("200 clients:", crowd))
    print(_line("the floor:", floor) + " (a bare ASGI app pushing to 200 streams)")
    for kind, index in (("read", 0), ("arrived", 1)):
        p50, p99 = _pct(crowd[index], 0.5), _pct(crowd[index], 0.99)
        f50, f99 = _pct(floor[index], 0.5), _pct(floor[index], 0.99)
        verdict = "ok" if p50 <= 5 and p99 <= 25 else "OVER"
        print(
            f"  {kind}: 200 clients p50 {p50:.2f} ms, p99 {p99:.2f} ms (targets p50 <= 5, "
            f"p99 <= 25: {verdict}); over the floor p50 {p50 / f50:.2f}x, p99 {p99 / f99:.2f}x"
        )
    print(
        f"  {len(crowd[0])} samples; clients that differ from GET: {bad}; the reader's "
        f"CPU per socket read: {ours.cpu_s / max(ours.reads, 1) * 1e6:.0f} us "
        f"(the floor's run {bare.cpu_s / max(bare.reads, 1) * 1e6:.0f} us), "
        f"{ours.cpu_s / pieces * 1000:.1f} ms per delta to 200 clients"
    )


async def _load(
    port: int, token: str, pid: int, turns: int, per_turn: int, make: Callable[[], Reader]
) -> None:
    started = time.perf_counter()
    listener = make()
    try:
        outcomes = await asyncio.gather(
            *(_turn(listener, port, token, 20, 10, per_turn) for _ in range(turns)),
            return_exceptions=True,
        )
    finally:
        listener.stop()
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    bad = sum(
        _check(t, f, r) for t, f, r, _ in (o for o in outcomes if not isinstance(o, BaseException))
    )
    samples = [s for o in outcomes if not isinstance(o, BaseException) for s in o[3][0]]
    print(
        f"{turns} concurrent turns, {turns * per_turn} stream clients: {len(errors)} error(s), "
        f"{bad} client(s) with lost or duplicated deltas, {time.perf_counter() - started:.1f} s, "
        f"latency p50 {_pct(samples, 0.5):.1f} ms p99 {_pct(samples, 0.99):.1f} ms, "
        f"server RSS {_rss_mb(pid):.0f} MB"
    )
    for error in errors[:3]:
        print(f"  error: {type(error).__name__}: {error}")


async def _hammer(http: list[Http], token: str, path: str, seconds: float) -> int:
    deadline = time.perf_counter() + seconds

    async def worker(connection: Http) -> int:
        count = 0
        while time.perf_counter() < deadline:
            connection.send("GET", path, token)
            status, _ = await connection.response()
            assert status == 200, status
            count += 1
        return count

    return sum(await asyncio.gather(*(worker(connection) for connection in http)))


def _rates(
    servers: list[tuple[int, int]], token: str, path: str, seconds: float
) -> list[tuple[float, float]]:
    """Requests/s and server CPU per request of each (port, pid), 8 keep-alive connections
    each, measured in turns of a tenth of ``seconds`` so that what else runs on the machine
    weighs on every server alike."""

    async def run() -> list[tuple[float, float]]:
        pools = [[await Http.connect(port) for _ in range(8)] for port, _ in servers]
        counts, cpu, wall = [0] * len(servers), [0.0] * len(servers), [0.0] * len(servers)
        for _ in range(10):
            for index, ((_, pid), pool) in enumerate(zip(servers, pools, strict=True)):
                before, started = _cpu_s(pid), time.perf_counter()
                counts[index] += await _hammer(pool, token, path, seconds / 10)
                wall[index] += time.perf_counter() - started
                cpu[index] += _cpu_s(pid) - before
        for pool in pools:
            for connection in pool:
                connection.close()
        return [(c / w, t / c * 1e6) for c, w, t in zip(counts, wall, cpu, strict=True)]

    return asyncio.run(run())


def main(quick: bool = False, python_reader: bool = False) -> int:
    """``python_reader``: read the streams with the Python reader even with a C compiler
    (``--python-reader``, to compare the two readers)."""
    from roboz.threads import Caller, SQLiteThreadStore

    work = Path(tempfile.mkdtemp(prefix="roboz-bench-server-"))
    store_path = work / "threads.db"
    with SQLiteThreadStore(store_path) as store:
        _, token = store.create_api_token(Caller("bench", "bench"))
    serve = [
        sys.executable,
        "-m",
        "roboz.cli",
        "serve",
        "--port",
        "0",
        "--store",
        str(store_path),
        "--app",
        "benchmarks.bench_server:agents",
        "--log-level",
        "warning",
    ]
    server, port = _start(serve, work)
    try:
        make, reader = choose_reader(work, python=python_reader)
        bare_sse, bare_sse_port = _start([sys.executable, "-c", BARE_SSE], work)
        try:
            asyncio.run(_latency(port, token, 50 if quick else 200, bare_sse_port, make, reader))
        finally:
            bare_sse.terminate()
            bare_sse.wait(30)
        turns, per_turn = (10, 4) if quick else (50, 4)
        asyncio.run(_load(port, token, server.pid, turns, per_turn, make))

        async def a_thread() -> str:
            http = await Http.connect(port)
            pages = await http.request("GET", "/v1/ai/threads?limit=1", token)
            http.close()
            return str(pages["threads"][0]["thread_id"])

        thread_id = asyncio.run(a_thread())
        path = f"/v1/ai/threads/{thread_id}"

        async def body() -> bytes:
            http = await Http.connect(port)
            http.send("GET", path, token)
            _, data = await http.response()
            http.close()
            return data

        (work / "thread.json").write_bytes(asyncio.run(body()))
        bare, bare_port = _start([sys.executable, "-c", BARE, str(work / "thread.json")], work)
        try:
            seconds = 2.0 if quick else 5.0
            ours, base = _rates([(port, server.pid), (bare_port, bare.pid)], token, path, seconds)
        finally:
            bare.terminate()
            bare.wait(30)
        size = (work / "thread.json").stat().st_size
        print(
            f"GET thread ({size} bytes of JSON), 8 keep-alive connections, {seconds:g} s each "
            "(in turns of a tenth):"
        )
        print(f"  bare ASGI handler: {base[0]:7.0f} req/s, server CPU {base[1]:6.0f} us/request")
        print(f"  roboz serve:       {ours[0]:7.0f} req/s, server CPU {ours[1]:6.0f} us/request")
        ratio = ours[1] / base[1]
        print(
            f"  cost ratio (server CPU per request): {ratio:.2f}x (target <= 1.5x: "
            f"{'ok' if ratio <= 1.5 else 'OVER'}); req/s ratio {base[0] / ours[0]:.2f}x"
        )
    finally:
        server.terminate()
        server.wait(60)
        shutil.rmtree(work, ignore_errors=True)
    return 0


agents = _agents() if os.environ.get("ROBOZ_BENCH_SERVER_AGENTS", "1") == "1" else None
"""What the benchmark's server serves (``--app benchmarks.bench_server:agents``)."""

if __name__ == "__main__":
    raise SystemExit(main(quick="--quick" in sys.argv, python_reader="--python-reader" in sys.argv))
