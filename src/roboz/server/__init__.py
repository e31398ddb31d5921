"""``roboz serve``: the thread API over HTTP (``roboz[server]``), and its typed client.

:func:`create_app` builds the ASGI application (FastAPI) serving agents over a thread store;
``roboz serve`` runs it with uvicorn. :class:`ThreadClient` and :class:`AsyncThreadClient`
(httpx) speak the same API from Python. The names load on first use, so importing
``roboz.server`` costs nothing until one is used.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roboz.server.app import create_app
    from roboz.server.client import (
        AsyncThreadClient,
        ThreadApiError,
        ThreadClient,
        TurnStarted,
        is_idle,
    )

__all__ = [
    "AsyncThreadClient",
    "ThreadApiError",
    "ThreadClient",
    "TurnStarted",
    "create_app",
    "is_idle",
]

_HOMES = {
    "create_app": "roboz.server.app",
    "AsyncThreadClient": "roboz.server.client",
    "ThreadApiError": "roboz.server.client",
    "ThreadClient": "roboz.server.client",
    "TurnStarted": "roboz.server.client",
    "is_idle": "roboz.server.client",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'roboz.server' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
