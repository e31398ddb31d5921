"""Provider-neutral records: what an endpoint receives after message mapping and scrubbing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, NotRequired, TypedDict

from roboz.models import Image, Message, Role


class ProviderRecord(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str
    images: NotRequired[list[Image]]


MessagesScrubber = Callable[[Sequence[Message]], list[ProviderRecord]]

PROVIDER_ROLE: dict[Role, Literal["system", "user", "assistant"]] = {
    Role.SYSTEM: "system",
    Role.USER: "user",
    Role.ASSISTANT: "assistant",
    # Providers have no neutral "tool result" turn for free-form JSON actions; results go back
    # as user turns, which is also the only role that may carry images.
    Role.TOOL: "user",
}


def default_messages_scrubber(messages: Sequence[Message]) -> list[ProviderRecord]:
    """Map roles and keep only role, content and images (runtime metadata never leaves)."""
    records: list[ProviderRecord] = []
    for message in messages:
        content = message.content
        if message.role is Role.TOOL and message.caller:
            content = f"[{message.caller} result] {content}"
        records.append(
            {
                "role": PROVIDER_ROLE[message.role],
                "content": content,
                "images": list(message.images),
            }
        )
    return records


def check_image_roles(records: Sequence[ProviderRecord]) -> None:
    """Images may only travel on user turns; a custom scrubber that breaks this is a bug."""
    for index, record in enumerate(records):
        if record.get("images") and record["role"] != "user":
            raise ValueError(
                f"record {index} has role {record['role']!r} but carries images; "
                "image inputs require the user role after message mapping"
            )
