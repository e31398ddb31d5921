"""bench_server's SSE stream clients: raw sockets that speak HTTP/1.1 and a reader that only
takes the time of each read.

The benchmark connects every stream client and sends its request here; a reader then reads
the sockets as data arrives (epoll) and keeps each read with two times on CLOCK_MONOTONIC:
when the reader read it, and when the kernel put it in the socket (``SO_TIMESTAMPNS``).
The stamps and events are parsed after the turn, from the kept bytes, the same way
whichever reader read them.

Two readers: ``NativeReader`` (``sse_reader.c``, built with the C compiler at run time, a
process of its own that takes each socket over SCM_RIGHTS) and ``PythonReader`` (a thread
of this process, the fallback without a compiler). On the 2-core machine the Python reader
took ~3 ms of CPU per delta fanned to 200 clients, from the cores the server runs on: its
"read" times measured the reader as much as the server.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import re
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

try:
    from benchmarks.native import build
except ImportError:  # run as a script: benchmarks/ is on sys.path, not the repository
    from native import build  # type: ignore[no-redef]

STAMP = re.compile(rb"<(\d{6,})>")
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's, for Pythons that lack it
"""A socket option: each read comes with the kernel's receive time (a struct timespec)."""


def parse_event(block: bytes) -> tuple[str, str]:
    """An SSE event's name and data (one ``data:`` line, as the server writes them)."""
    name, data = "message", ""
    for line in block.decode().split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
    return name, data


class Follower:
    """One stream client that only takes the time: each read of its socket is kept with the
    time it arrived, and nothing else is done with it until the turn is over (the stamps
    and events are parsed then)."""

    def __init__(self, ident: int, sock: socket.socket | None) -> None:
        self.ident = ident
        self.sock = sock
        """The socket, while this process reads it (``PythonReader``)."""
        self.reads: list[tuple[int, int, bytes]] = []
        """(read, arrived, data): when the reader read it and when the kernel received it
        (the socket's receive timestamp), both on CLOCK_MONOTONIC."""
        self._tail = b""  # a marker may straddle two reads
        self._connected = False
        self.connected = threading.Event()
        self.done = threading.Event()

    def feed(self, now: int, arrived: int, data: bytes) -> None:
        self.reads.append((now, arrived, data))
        probe = self._tail + data
        self._tail = data[-32:]
        if b'"status":"user_turn"' in probe:
            self.done.set()
        elif not self._connected and b": connected" in probe:
            self._connected = True
            self.connected.set()

    def stamps(self, arrived: bool = False) -> list[float]:
        """Each stamped piece's latency in ms, to the read that completed it: when the
        reader read it, or (``arrived``) when it arrived in the socket."""
        raw = b"".join(data for _, _, data in self.reads)
        ends = list(itertools.accumulate(len(data) for _, _, data in self.reads))
        times = [at if arrived else read for read, at, _ in self.reads]
        return [
            (times[bisect.bisect_left(ends, found.end())] - int(found.group(1))) / 1e6
            for found in STAMP.finditer(raw)
        ]

    def deltas(self) -> list[Any]:
        from roboz.threads import AgentThreadDelta

        head, _, body = b"".join(data for _, _, data in self.reads).partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"stream refused: {head[:80]!r}")
        text = bytearray()
        while body:  # the chunked encoding
            size_line, _, body = body.partition(b"\r\n")
            size = int(size_line or b"0", 16)
            text += body[:size]
            body = body[size + 2 :]
        deltas: list[Any] = []
        for block in bytes(text).split(b"\n\n"):
            name, data = parse_event(block)
            if name == "error":
                raise RuntimeError(f"stream error: {data}")
            if name == "delta" and data:
                deltas.append(AgentThreadDelta.model_validate_json(data))
        return deltas


def connect(port: int, token: str, thread_id: str, start: str) -> socket.socket:
    """A stream client's socket, its request sent (whichever reader reads it)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.sendall(
        (
            f"GET /v1/ai/threads/{thread_id}/stream HTTP/1.1\r\nHost: bench\r\n"
            f"Authorization: Bearer {token}\r\nLast-Event-ID: {start}\r\n\r\n"
        ).encode()
    )
    return sock


class Reader(Protocol):
    cpu_s: float
    """The CPU time the reader took reading (known once stopped)."""
    reads: int

    def follow(self, port: int, token: str, thread_id: str, start: str) -> Follower: ...
    def close(self, follower: Follower) -> None: ...
    def stop(self) -> None: ...


class PythonReader:
    """Every stream client's socket, read by one thread of this process as data arrives
    (epoll), doing nothing but stamping and keeping each read."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._followers: dict[int, Follower] = {}
        self._ids = itertools.count()
        self.cpu_s = 0.0
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="listener", daemon=True)
        self._thread.start()

    def follow(self, port: int, token: str, thread_id: str, start: str) -> Follower:
        sock = connect(port, token, thread_id, start)
        sock.setblocking(False)
        follower = Follower(next(self._ids), sock)
        self._followers[sock.fileno()] = follower
        self._epoll.register(sock.fileno(), select.EPOLLIN)
        return follower

    def _run(self) -> None:
        # The kernel's receive timestamps are CLOCK_REALTIME; the stamps CLOCK_MONOTONIC.
        offset = time.time_ns() - time.monotonic_ns()
        space = socket.CMSG_SPACE(16)
        started = time.thread_time()
        try:
            self._read(offset, space)
        finally:
            self.cpu_s = time.thread_time() - started

    def _read(self, offset: int, space: int) -> None:
        # Read into one buffer kept for every read: ``recvmsg(1 << 20)`` allocated (and
        # released) a MiB per read, ~25 us of this thread's ~35 us per read.
        buffer = memoryview(bytearray(1 << 20))
        buffers = [buffer]
        timespec = struct.Struct("qq").unpack_from
        followers, poll, clock = self._followers, self._epoll.poll, time.monotonic_ns
        reads = 0
        while not self._stop.is_set():
            for fd, _ in poll(0.05):
                follower = followers.get(fd)
                if follower is None or follower.sock is None:
                    continue
                try:
                    size, ancillary, _, _ = follower.sock.recvmsg_into(buffers, space)
                except BlockingIOError:
                    continue
                now = clock()
                if not size:
                    self._epoll.unregister(fd)
                    follower.done.set()
                    continue
                arrived = now
                for level, kind, value in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        seconds, nanoseconds = timespec(value)
                        arrived = seconds * 1_000_000_000 + nanoseconds - offset
                follower.feed(now, arrived, buffer[:size].tobytes())
                reads += 1
            self.reads = reads

    def close(self, follower: Follower) -> None:
        assert follower.sock is not None
        fd = follower.sock.fileno()
        if self._followers.pop(fd, None) is not None:
            with contextlib.suppress(OSError):
                self._epoll.unregister(fd)
        follower.sock.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._epoll.close()


_RECORD = struct.Struct("=qqQ")  # sse_reader.c's Read: read_ns, arrived_ns, size


class NativeReader:
    """The same reader in C (``sse_reader.c``), a process of its own: each socket is handed
    over once its request is sent, and its reads come back at its close, as a file."""

    def __init__(self, binary: Path, directory: Path) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="sse-reader-", dir=directory))
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [str(binary), str(theirs.fileno()), str(self._directory)], pass_fds=[theirs.fileno()]
        )
        theirs.close()
        self._followers: dict[int, Follower] = {}
        self._closed: dict[int, threading.Event] = {}
        self._ids = itertools.count()
        self._stopped = threading.Event()
        self._gone = False
        self.cpu_s = 0.0
        self.reads = 0
        self._thread = threading.Thread(target=self._listen, name="sse-reader", daemon=True)
        self._thread.start()

    def follow(self, port: int, token: str, thread_id: str, start: str) -> Follower:
        sock = connect(port, token, thread_id, start)
        follower = Follower(next(self._ids), None)
        self._followers[follower.ident] = follower
        self._closed[follower.ident] = threading.Event()
        socket.send_fds(self._control, [b"F %d" % follower.ident], [sock.fileno()])
        sock.close()  # the reader's copy stays open
        return follower

    def _listen(self) -> None:
        """The reader's news: a client connected ("c"), done ("d"), dumped ("X"); stopped."""
        while message := self._control.recv(64):
            kind, _, rest = message.partition(b" ")
            if kind == b"S":
                cpu_ns, reads = rest.split()
                self.cpu_s, self.reads = int(cpu_ns) / 1e9, int(reads)
                break
            ident = int(rest)
            if kind == b"c":
                self._followers[ident].connected.set()
            elif kind == b"d":
                self._followers[ident].done.set()
            elif kind == b"X":
                self._closed[ident].set()
        # Gone (or stopped): wake whoever waits, so that a dead reader is an error, not a hang.
        self._gone = True
        self._stopped.set()
        for follower in self._followers.values():
            follower.connected.set()
            follower.done.set()
        for closed in self._closed.values():
            closed.set()

    def close(self, follower: Follower) -> None:
        if follower.ident not in self._followers:
            return
        self._control.send(b"C %d" % follower.ident)
        self._closed[follower.ident].wait(60)
        path = self._directory / str(follower.ident)
        if not path.exists():
            raise RuntimeError(f"the C reader did not hand back client {follower.ident}")
        raw = memoryview(path.read_bytes())
        path.unlink()
        (count,) = struct.unpack_from("=Q", raw)
        at = 8 + count * _RECORD.size
        for read_ns, arrived_ns, size in _RECORD.iter_unpack(raw[8:at]):
            follower.reads.append((read_ns, arrived_ns, raw[at : at + size].tobytes()))
            at += size
        del self._followers[follower.ident], self._closed[follower.ident]

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._control.send(b"S")
        self._stopped.wait(30)
        self._thread.join(5)
        self._control.close()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._directory, ignore_errors=True)


def choose_reader(directory: Path, python: bool = False) -> tuple[Callable[[], Reader], str]:
    """A maker of readers and what it is: the C reader, built into ``directory``, or without
    a C compiler (or asked for: ``python``) the Python one, said so."""
    why = "asked for"
    if not python:
        built = build("sse_reader", directory)
        if isinstance(built, Path):
            return (lambda: NativeReader(built, directory)), "benchmarks/sse_reader.c (C, epoll)"
        why = built
    return PythonReader, (
        f"a Python thread of the benchmark's process ({why}), sharing the cores with the server"
    )
