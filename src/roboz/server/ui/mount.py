"""Serve the web UI's files (``static/``) at ``/``: no build step, nothing from elsewhere.

Every page and file goes out with a Content-Security-Policy that allows this origin only
(images also as ``data:`` URLs, which tool results may carry), so nothing a thread holds can
load a script or reach another host from the page.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).parent / "static"

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class _Static(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


def mount_ui(app: FastAPI) -> None:
    """``/`` is the page; ``/ui/...`` its scripts and styles."""

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:  # pyright: ignore[reportUnusedFunction]
        return FileResponse(STATIC / "index.html", headers=HEADERS)

    app.mount("/ui", _Static(directory=STATIC), name="ui")
