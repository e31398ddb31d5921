"""Run-time plumbing: events and sinks, user interaction."""

from roboz.runtime.events import Event, EventPipe, RunPipe, current_pipe, emit, use_pipe
from roboz.runtime.io import CliUserIO, UserIO, current_user_io, interact_with_user, use_user_io
from roboz.runtime.usage import LLMCallUsage, ModelPrice, ModelUsage, RunUsage

__all__ = [
    "CliUserIO",
    "Event",
    "EventPipe",
    "LLMCallUsage",
    "ModelPrice",
    "ModelUsage",
    "RunPipe",
    "RunUsage",
    "UserIO",
    "current_pipe",
    "current_user_io",
    "emit",
    "interact_with_user",
    "use_pipe",
    "use_user_io",
]
