"""OpenTelemetry tracing for RoboZ agents (extra ``roboz[otel]``: the OpenTelemetry API only).

``instrument(agent)`` subscribes an ``OTelSink`` to the agent's event pipe; spans go to
whatever TracerProvider the application configured (none configured: the API's no-op). The
agent core does not import this package, so without the extra nothing changes and nothing
is paid.
"""

try:
    import opentelemetry.trace as _api  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "roboz.tracing needs the OpenTelemetry API: pip install 'roboz[otel]'"
    ) from error

from roboz.tracing.sink import OTelSink, instrument

__all__ = ["OTelSink", "instrument"]
