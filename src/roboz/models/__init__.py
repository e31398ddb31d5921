"""Typed values, messages and truncation settings shared by every part of RoboZ."""

from roboz.models.images import Image
from roboz.models.messages import Message, Role, filter_messages
from roboz.models.truncation import Severity, Truncation
from roboz.models.values import Empty, Int, Invoke, RawText, Stop, Str, StrImage

__all__ = [
    "Empty",
    "Image",
    "Int",
    "Invoke",
    "Message",
    "RawText",
    "Role",
    "Severity",
    "Stop",
    "Str",
    "StrImage",
    "Truncation",
    "filter_messages",
]
