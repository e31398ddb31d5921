"""MCP for RoboZ (extra ``roboz[mcp]``): servers' tools as typed, chainable, guarded tools.

``MCPServer.stdio(...)`` / ``MCPServer.http(url)`` connect lazily; ``server.tools()`` or the
``MCPTools`` capability turn each MCP tool into a RoboZ ``Tool``. The guarded server that
offers RoboZ's own file tools to MCP hosts is ``roboz.mcp.serve`` (``roboz mcp serve``).
"""

try:
    import mcp as _sdk  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as error:  # pragma: no cover - depends on the installation
    # RoboZ installs from its repository, not the public index, so the extra comes from there.
    raise ImportError(
        "roboz.mcp needs the MCP SDK (RoboZ's mcp extra): in the RoboZ clone run "
        "pip install -e '.[mcp]' (or uv sync --extra mcp)"
    ) from error

from roboz.mcp.capability import MCPTools
from roboz.mcp.client import (
    MCPCallError,
    MCPConnectionError,
    MCPError,
    MCPServer,
    MCPTimeout,
)
from roboz.mcp.permissions import MCPCallDecided
from roboz.mcp.schema import MCPValue, SchemaError, model_from_schema
from roboz.mcp.tools import MCPToolError, succeeded

__all__ = [
    "MCPCallDecided",
    "MCPCallError",
    "MCPConnectionError",
    "MCPError",
    "MCPServer",
    "MCPTimeout",
    "MCPToolError",
    "MCPTools",
    "MCPValue",
    "SchemaError",
    "model_from_schema",
    "succeeded",
]
