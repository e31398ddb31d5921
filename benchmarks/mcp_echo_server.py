"""The MCP server bench_mcp calls: one echo tool, on the SDK's FastMCP over stdio."""

from mcp.server.fastmcp import FastMCP

server = FastMCP("bench", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
