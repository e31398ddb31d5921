"""The trace id of the OpenTelemetry span in force, for clients that pass it on (the SafeScripts
helper logs it with the run it started).

Reading it costs nothing when OpenTelemetry is not in use: the module is looked up among the
ones already imported, never imported here, so the core keeps no dependency on it.
"""

from __future__ import annotations

import sys


def current_trace_id() -> str | None:
    """The W3C trace id (32 hex digits) of the current span, or None without a valid one."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")
