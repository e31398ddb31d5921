"""Provider records -> OpenAI chat messages.

Text-only records keep plain string content (the shape every OpenAI-compatible server
accepts); only records that carry images become content-part lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roboz.llm.records import ProviderRecord, check_image_roles


def to_openai_messages(
    records: Sequence[ProviderRecord], *, accepts_images: bool, endpoint: str
) -> list[dict[str, Any]]:
    if not accepts_images and any(record.get("images") for record in records):
        # call_llm_api strips images for such endpoints; reaching here means a direct caller
        # would otherwise have its images dropped without notice.
        raise ValueError(
            f"endpoint {endpoint!r} does not accept images; create it with accepts_images=True "
            "or send records without images"
        )
    check_image_roles(records)
    messages: list[dict[str, Any]] = []
    for record in records:
        images = record.get("images") or []
        if not images:
            messages.append({"role": record["role"], "content": record["content"]})
            continue
        parts: list[dict[str, Any]] = []
        if record["content"]:
            parts.append({"type": "text", "text": record["content"]})
        parts.extend(
            {"type": "image_url", "image_url": {"url": image.url, "detail": image.detail}}
            for image in images
        )
        messages.append({"role": record["role"], "content": parts})
    return messages
