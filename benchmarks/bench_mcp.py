"""MCP tool calls through RoboZ against direct SDK calls; tracing on against off.

1. One server (FastMCP over stdio), two clients in turn: the SDK's own ClientSession called
   from its event loop, and the RoboZ tool (typed input, permission rules, the hop from the
   caller's thread to the server's loop, typed output). Ratio of the medians (target <= 1.2x).
2. The 200-step chained run of bench_core with and without ``roboz.tracing.instrument``:
   with the OpenTelemetry SDK (a BatchSpanProcessor and an exporter that drops the spans,
   the usual production setup minus the network) and with the API alone (no SDK configured).
   Ratio of the best runs (target <= 1.3x).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.bench_core import STEPS, _best_of, _chain_agent

SERVER = [sys.executable, str(Path(__file__).with_name("mcp_echo_server.py"))]


def _sdk_calls(count: int) -> list[float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def go() -> list[float]:
        params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
        with open(os.devnull, "w") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await session.list_tools()
                timings = []
                for index in range(count):
                    started = time.perf_counter()
                    await session.call_tool("echo", {"text": f"call {index}"})
                    timings.append(time.perf_counter() - started)
                return timings

    return asyncio.run(go())


def _roboz_calls(count: int) -> list[float]:
    from roboz.mcp import MCPServer

    with MCPServer.stdio(SERVER[0], SERVER[1:], name="bench", stderr=subprocess.DEVNULL) as server:
        [echo] = server.tools(include=["echo"], rules={"delete_*": "deny"})
        timings = []
        for index in range(count):
            value = echo.input_type.model_validate({"text": f"call {index}"})
            started = time.perf_counter()
            echo.run(value, [])
            timings.append(time.perf_counter() - started)
        return timings


def mcp_call_overhead(count: int) -> None:
    sdk: list[float] = []
    ours: list[float] = []
    for _ in range(2):  # interleaved, so both see the same machine load
        sdk += _sdk_calls(count)[10:]
        ours += _roboz_calls(count)[10:]
    direct, through = statistics.median(sdk) * 1e6, statistics.median(ours) * 1e6
    print(
        f"MCP tool call: {through:.0f} µs through a RoboZ tool, {direct:.0f} µs with the SDK "
        f"directly, ratio {through / direct:.2f}x (target <= 1.2x)"
    )


class _DropSpans:
    def export(self, spans: Sequence[object]) -> object:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def tracing_overhead(repeats: int) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from roboz.tracing import instrument

    provider = TracerProvider()
    provider.add_span_processor(
        BatchSpanProcessor(_DropSpans(), max_queue_size=1 << 16)  # type: ignore[arg-type]
    )
    plain = _chain_agent()
    agents = {
        "SDK, a span per call": _chain_agent(),
        "SDK, chained calls summarised": _chain_agent(),
        "API without SDK": _chain_agent(),
    }
    instrument(agents["SDK, a span per call"], tracer_provider=provider)
    instrument(
        agents["SDK, chained calls summarised"], tracer_provider=provider, chained_spans=False
    )
    instrument(agents["API without SDK"])
    for agent in (plain, *agents.values()):
        result, _ = agent.invoke()
        assert result.value == STEPS
    off = _best_of(plain.invoke, repeats)
    figures = []
    for name, agent in agents.items():
        on = _best_of(agent.invoke, repeats)
        figures.append(f"{name} {on * 1e3:.2f} ms ({on / off:.2f}x)")
    provider.shutdown()
    print(
        f"tracing, {STEPS}-step chained run (target <= 1.3x): off {off * 1e3:.2f} ms; "
        + "; ".join(figures)
    )


def main(quick: bool = False) -> None:
    mcp_call_overhead(60 if quick else 400)
    tracing_overhead(3 if quick else 15)


if __name__ == "__main__":
    main()
