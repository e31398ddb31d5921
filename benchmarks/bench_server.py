"""``roboz serve`` under load, on loopback: a real server process, raw-socket clients.

1. Append-to-client latency of a delta over SSE with 200 connected stream clients on one
   thread (targets, issue 27: p50 <= 5 ms, p99 <= 25 ms), beside one lone client in the same
   run. The scripted endpoint stamps each streamed piece with ``time.monotonic_ns()`` when it
   hands it to the run (which appends it to the thread at once); a client's latency is its
   arrival time minus that stamp (CLOCK_MONOTONIC is one clock for every process here).
2. 50 concurrent turns with 200 stream clients spread over their threads: no error, no lost
   or duplicated delta (every client's rebuilt thread equals GET of the thread), server RSS.
3. ``GET`` of a thread, requests/s and server CPU per request, against a bare ASGI handler
   returning the same JSON on the same uvicorn (target: <= 1.5x its cost).

Clients speak HTTP/1.1 over asyncio streams (no client library), so what is measured is the
server. Run: ``python -m benchmarks bench_server [--quick]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STAMP = re.compile(r"<(\d{6,})>")


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
                name, data = "message", ""
                for line in block.decode().split("\n"):
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: "):
                        data = line[6:]
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


# -- the measurements -----------------------------------------------------------------------


async def _follow(port: int, token: str, thread_id: str, start: str, stamps: list[float]) -> Any:
    """One stream client: latencies of stamped pieces, and the deltas it applied."""
    from roboz.threads import AgentThreadDelta

    http = await Http.connect(port)
    http.send(
        "GET", f"/v1/ai/threads/{thread_id}/stream", token, extra=f"Last-Event-ID: {start}\r\n"
    )
    status, _ = await http.head()
    assert status == 200, status
    deltas: list[Any] = []
    async for name, data in http.events():
        now = time.monotonic_ns()
        if name != "delta":
            raise RuntimeError(f"stream error: {data}")
        for stamp in STAMP.findall(data):
            stamps.append((now - int(stamp)) / 1e6)
        delta = AgentThreadDelta.model_validate_json(data)
        deltas.append(delta)
        if delta.status is not None and delta.status.value == "user_turn":
            break
    http.close()
    return deltas


async def _turn(port: int, token: str, pieces: int, pause_ms: int, clients: int) -> Any:
    http = await Http.connect(port)
    thread = await http.request("POST", "/v1/ai/threads", token, {})
    stamps: list[float] = []
    followers = [
        asyncio.create_task(
            _follow(port, token, thread["thread_id"], thread["continuation_token"], stamps)
        )
        for _ in range(clients)
    ]
    await asyncio.sleep(0.5 + clients * 0.002)  # every stream connected and idle
    await http.request(
        "POST",
        f"/v1/ai/threads/{thread['thread_id']}/messages",
        token,
        {"text": f"{pieces} {pause_ms}"},
    )
    results = await asyncio.gather(*followers)
    final = await http.request("GET", f"/v1/ai/threads/{thread['thread_id']}", token)
    http.close()
    return thread, final, results, stamps


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


async def _latency(port: int, token: str, pieces: int) -> None:
    _, _, _, alone = await _turn(port, token, pieces, 20, 1)
    thread, final, results, crowd = await _turn(port, token, pieces, 20, 200)
    bad = _check(thread, final, results)
    print(f"SSE append-to-client latency, {pieces} deltas, pieces 20 ms apart:")
    print(f"  1 client:    p50 {_pct(alone, 0.5):6.2f} ms  p99 {_pct(alone, 0.99):6.2f} ms")
    p50, p99 = _pct(crowd, 0.5), _pct(crowd, 0.99)
    verdict = "ok" if p50 <= 5 and p99 <= 25 else "OVER"
    print(
        f"  200 clients: p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  ({len(crowd)} samples; "
        f"targets p50 <= 5, p99 <= 25: {verdict}); clients that differ from GET: {bad}"
    )


async def _load(port: int, token: str, pid: int, turns: int, per_turn: int) -> None:
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(_turn(port, token, 20, 10, per_turn) for _ in range(turns)), return_exceptions=True
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    bad = sum(
        _check(t, f, r) for t, f, r, _ in (o for o in outcomes if not isinstance(o, BaseException))
    )
    samples = [s for o in outcomes if not isinstance(o, BaseException) for s in o[3]]
    print(
        f"{turns} concurrent turns, {turns * per_turn} stream clients: {len(errors)} error(s), "
        f"{bad} client(s) with lost or duplicated deltas, {time.perf_counter() - started:.1f} s, "
        f"latency p50 {_pct(samples, 0.5):.1f} ms p99 {_pct(samples, 0.99):.1f} ms, "
        f"server RSS {_rss_mb(pid):.0f} MB"
    )
    for error in errors[:3]:
        print(f"  error: {type(error).__name__}: {error}")


async def _hammer(port: int, token: str, path: str, seconds: float, connections: int) -> int:
    deadline = time.perf_counter() + seconds
    counts = [0] * connections

    async def worker(index: int) -> None:
        http = await Http.connect(port)
        while time.perf_counter() < deadline:
            http.send("GET", path, token)
            status, _ = await http.response()
            assert status == 200, status
            counts[index] += 1
        http.close()

    await asyncio.gather(*(worker(i) for i in range(connections)))
    return sum(counts)


def _rate(port: int, pid: int, token: str, path: str, seconds: float) -> tuple[float, float]:
    cpu = _cpu_s(pid)
    started = time.perf_counter()
    count = asyncio.run(_hammer(port, token, path, seconds, 8))
    elapsed = time.perf_counter() - started
    return count / elapsed, (_cpu_s(pid) - cpu) / count * 1e6


def main(quick: bool = False) -> int:
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
        asyncio.run(_latency(port, token, 50 if quick else 200))
        turns, per_turn = (10, 4) if quick else (50, 4)
        asyncio.run(_load(port, token, server.pid, turns, per_turn))

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
            ours = _rate(port, server.pid, token, path, seconds)
            base = _rate(bare_port, bare.pid, token, path, seconds)
        finally:
            bare.terminate()
            bare.wait(30)
        size = (work / "thread.json").stat().st_size
        print(f"GET thread ({size} bytes of JSON), 8 keep-alive connections, {seconds:g} s each:")
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
    raise SystemExit(main(quick="--quick" in sys.argv))
