"""A real MCP server for the tests, written with the SDK's FastMCP server API.

Run as ``python demo_server.py`` (stdio) or ``python demo_server.py --http PORT``. Every call
is appended to the file named by DEMO_RECORD (if set) before the tool does anything, so tests
can prove which calls reached the server.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from typing import Literal

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.utilities.types import Image
from pydantic import BaseModel, Field

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

port = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--http" else 8000
server = FastMCP("demo", host="127.0.0.1", port=port, log_level="WARNING")


def record(name: str) -> None:
    path = os.environ.get("DEMO_RECORD")
    if path:
        with open(path, "a") as fh:
            fh.write(name + "\n")


class Weather(BaseModel):
    city: str
    temperature: float
    unit: Literal["c", "f"]


class Filter(BaseModel):
    depth: int = Field(description="how deep")
    tags: list[str] = []


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    record("echo")
    return text


@server.tool()
def shout(text: str, times: int = 1) -> str:
    """Upper-case the text, repeated `times` times."""
    record("shout")
    return " ".join([text.upper()] * times)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    record("add")
    return a + b


@server.tool()
def weather(city: str, unit: Literal["c", "f"] = "c") -> Weather:
    """The weather in a city."""
    record("weather")
    return Weather(city=city, temperature=21.5 if unit == "c" else 70.7, unit=unit)


@server.tool()
def search(query: str, filter: Filter, limit: int | None = None) -> str:
    """Search with a nested filter."""
    record("search")
    return f"{query}: depth {filter.depth}, tags {','.join(filter.tags)}, limit {limit}"


@server.tool()
def picture() -> Image:
    """A one-pixel picture."""
    record("picture")
    return Image(data=PNG, format="png")


@server.tool()
def fail(why: str) -> str:
    """Always fails."""
    record("fail")
    raise ValueError(f"failing on purpose: {why}")


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    record("slow")
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """The server is killed in the middle of this call."""
    record("die")
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool()
def die_leaving_child() -> str:
    """The server exits in the middle of this call, leaving a child that holds its stdout open
    (so the client never sees EOF); the child's pid is the first line of DEMO_CHILD_PID."""
    record("die_leaving_child")
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)  # inherits fd 1
    path = os.environ.get("DEMO_CHILD_PID")
    if path:
        with open(path, "w") as fh:
            fh.write(f"{child.pid}\n")
    os._exit(3)


@server.tool()
def spawn_child() -> str:
    """Start a long-running helper process in the server's process group; return its pid."""
    record("spawn_child")
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    return str(child.pid)


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ('' over stdio)."""
    record("header")
    request = ctx.request_context.request
    return "" if request is None else request.headers.get(name, "")


@server.tool()
def delete_all() -> str:
    """Something nobody should be allowed to run."""
    record("delete_all")
    return "everything deleted"


if __name__ == "__main__":
    server.run("streamable-http" if len(sys.argv) > 1 and sys.argv[1] == "--http" else "stdio")
