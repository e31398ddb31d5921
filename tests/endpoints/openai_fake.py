"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol.

Tests script its replies (status, text, SSE chunks, delays) and read back every request it
received, so the real openai client is exercised over real sockets.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = "ok"
    status: int = 200
    # Before the response starts; the handler wakes early when the server shuts down.
    delay_s: float = 0.0
    # Hold the response until this many requests have arrived in total (proves concurrency);
    # answer 503 if they never do.
    hold_until_requests: int = 0
    # Streamed replies send these pieces (default: the whole text as one piece).
    chunks: list[str] | None = None
    chunk_delay_s: float = 0.0
    error_message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    input_tokens: int = 11
    output_tokens: int = 7
    model: str | None = None


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[ReceivedRequest] = []
        self.request_arrived = threading.Event()
        self.response_finished = threading.Event()  # a handler returned (sent all or gave up)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._arrivals = threading.Condition(self._lock)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        # A short poll interval keeps shutdown (once per test) quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def next_reply(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            self._arrivals.notify_all()
            reply = self.replies.popleft() if self.replies else Reply()
        self.request_arrived.set()
        return reply

    def wait_for_requests(self, count: int, timeout_s: float) -> bool:
        with self._arrivals:
            return self._arrivals.wait_for(lambda: len(self.requests) >= count, timeout_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: every response ends by closing, so streams need no chunked encoding.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            # GET /models: what an endpoint's cheap health check asks for.
            request = ReceivedRequest(
                path=self.path,
                headers={key.lower(): value for key, value in self.headers.items()},
                body=b"",
            )
            reply = server.next_reply(request)
            try:
                if reply.status != 200:
                    self._send_error(reply, request)
                else:
                    model = {
                        "id": reply.model or "m",
                        "object": "model",
                        "created": 0,
                        "owned_by": "fake",
                    }
                    self._send_json(200, {"object": "list", "data": [model]}, reply)
            finally:
                server.response_finished.set()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = ReceivedRequest(
                path=self.path,
                headers={key.lower(): value for key, value in self.headers.items()},
                body=self.rfile.read(length),
            )
            reply = server.next_reply(request)
            try:
                self._respond(reply, request)
            finally:
                server.response_finished.set()

        def _respond(self, reply: Reply, request: ReceivedRequest) -> None:
            if reply.delay_s and server.stopping.wait(reply.delay_s):
                return
            if reply.hold_until_requests and not server.wait_for_requests(
                reply.hold_until_requests, 30
            ):
                reply = Reply(status=503, error_message="the other requests never arrived")
            try:
                if reply.status != 200:
                    self._send_error(reply, request)
                elif self.path.endswith("/audio/transcriptions"):
                    self._send_json(200, {"text": reply.text}, reply)
                elif request.json().get("stream"):
                    self._send_stream(reply, request.json())
                else:
                    self._send_json(200, _completion(reply, request.json()), reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout or cancellation): that is what we test

        def _send_error(self, reply: Reply, request: ReceivedRequest) -> None:
            message = reply.error_message
            if reply.status == 401:
                # Like real providers, echo the rejected key so tests can prove it is hidden.
                key = request.headers.get("authorization", "").removeprefix("Bearer ")
                message = f"Incorrect API key provided: {key}"
            body = {"error": {"message": message, "type": "scripted", "code": reply.status}}
            self._send_json(reply.status, body, reply)

        def _send_json(self, status: int, body: Any, reply: Reply) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

        def _send_stream(self, reply: Reply, body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            model = reply.model or body["model"]
            pieces = reply.chunks if reply.chunks is not None else [reply.text]
            for index, piece in enumerate(pieces):
                if index and reply.chunk_delay_s and server.stopping.wait(reply.chunk_delay_s):
                    return
                delta = (
                    {"role": "assistant", "content": piece} if index == 0 else {"content": piece}
                )
                self._event(_chunk(model, [{"index": 0, "delta": delta, "finish_reason": None}]))
            self._event(_chunk(model, [{"index": 0, "delta": {}, "finish_reason": "stop"}]))
            if body.get("stream_options", {}).get("include_usage"):
                self._event(_chunk(model, [], usage=_usage(reply)))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, data: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    return Handler


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _chunk(model: str, choices: list[Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def _completion(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": reply.model or body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(reply),
    }
