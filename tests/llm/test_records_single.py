"""``to_record`` is ``to_records`` for one message, for the endpoints the view renders each
message of once (the default scrubber)."""

from __future__ import annotations

import pytest

from roboz.llm import MockLLMEndpoint, to_records
from roboz.llm.completion import to_record
from roboz.models import Image, Message, Role

PNG = Image.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16, "image/png")


@pytest.mark.parametrize("accepts_images", [True, False])
def test_one_record_is_the_record_of_the_list(accepts_images: bool) -> None:
    endpoint = MockLLMEndpoint([], accepts_images=accepts_images)
    messages = [
        Message(role=Role.USER, content="hi", images=[PNG]),
        Message(role=Role.TOOL, content="{}", caller="look", images=[PNG]),
        Message(role=Role.TOOL, content="{}"),
        Message(role=Role.ASSISTANT, content="ok"),
        Message(role=Role.SYSTEM, content="rules"),
    ]
    for message in messages:
        assert to_record(endpoint, message) == to_records(endpoint, [message])[0]
    wrong = Message(role=Role.ASSISTANT, content="x", images=[PNG])
    if accepts_images:
        with pytest.raises(ValueError, match="carries images"):
            to_record(endpoint, wrong)
    else:
        assert to_record(endpoint, wrong) == to_records(endpoint, [wrong])[0]
