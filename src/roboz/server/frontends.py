"""What ``roboz serve`` serves beside the thread API, mounted in one place: the AG-UI run
endpoint (``/v1/agui``) and the web UI (``/``)."""

from __future__ import annotations

from fastapi import FastAPI


def mount_frontends(app: FastAPI) -> None:
    from roboz.server.agui import router
    from roboz.server.ui import mount_ui

    app.include_router(router)
    mount_ui(app)
