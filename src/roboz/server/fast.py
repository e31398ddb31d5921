"""The application class of ``roboz serve``: FastAPI, with what the hot paths need in front.

Every request keeps the ASGI server's own ``send`` in its scope (``sse.RAW_SEND``), so the
events the hub pushes to streams skip the middleware wrappers that only look at a response's
start.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from roboz.server.sse import RAW_SEND


class ThreadApp(FastAPI):
    """FastAPI, keeping the server's ``send`` for the streams."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[RAW_SEND] = send
        await super().__call__(scope, receive, send)


__all__ = ["ThreadApp"]
