import base64

import pytest
from pydantic import ValidationError

from roboz.models import (
    Empty,
    Image,
    Int,
    Message,
    Role,
    Severity,
    Stop,
    Str,
    StrImage,
    Truncation,
    filter_messages,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16
GIF = b"GIF89a" + b"\x00" * 16
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8


@pytest.mark.parametrize(
    ("data", "media"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
def test_image_from_bytes_accepts_each_supported_format(data: bytes, media: str) -> None:
    image = Image.from_bytes(data, media_type=media)  # type: ignore[arg-type]
    assert image.url.startswith(f"data:{media};base64,")
    assert base64.b64decode(image.url.split(",", 1)[1]) == data
    assert image.is_embedded


def test_image_from_bytes_rejects_bytes_that_do_not_match_the_media_type() -> None:
    with pytest.raises(ValueError, match="do not look like image/png"):
        Image.from_bytes(JPEG, media_type="image/png")


def test_image_from_bytes_rejects_unsupported_media_types() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        Image.from_bytes(PNG, media_type="image/tiff")  # type: ignore[arg-type]


def test_image_urls_must_be_http_or_data() -> None:
    assert Image(url="https://example.com/chart.png", detail="high").detail == "high"
    for bad in ("ftp://example.com/a.png", "file:///etc/passwd", "example.com/a.png", "https://"):
        with pytest.raises(ValidationError):
            Image(url=bad)


def test_data_urls_are_checked_without_decoding_pixels() -> None:
    good = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert Image(url=good).url == good
    wrong_magic = "data:image/png;base64," + base64.b64encode(b"not a png at all").decode()
    with pytest.raises(ValidationError, match="does not look like image/png"):
        Image(url=wrong_magic)
    with pytest.raises(ValidationError, match="data:image"):
        Image(url="data:text/plain;base64,aGVsbG8=")


def test_runtime_metadata_is_left_out_of_schemas_but_kept_on_instances() -> None:
    schema = Message.model_json_schema()
    for name in ("truncation", "message_kind", "endpoint", "model", "token_input", "token_output"):
        assert name not in schema["properties"]
    assert "truncation" not in Str.model_json_schema()["properties"]
    message = Message(role=Role.ASSISTANT, content="x", model="m", token_input=3)
    dumped = message.model_dump()
    assert dumped["model"] == "m" and dumped["token_input"] == 3
    value = Str(value="v", truncation=Truncation(threshold=1))
    assert value.model_dump()["truncation"]["threshold"] == 1


def test_value_types_declare_images_only_where_they_carry_them() -> None:
    assert "images" not in Str.model_json_schema()["properties"]
    assert "images" not in Int.model_json_schema()["properties"]
    with pytest.raises(ValidationError):
        StrImage(value="no images field")  # type: ignore[call-arg]
    assert StrImage(value="", images=[]).images == []
    assert isinstance(StrImage(value="t", images=[]), Str)


def test_values_reject_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Int(value=1, extra=2)  # type: ignore[call-arg]
    assert Stop().value == ""
    assert isinstance(Stop(value="x"), Empty)


def test_filter_messages_by_caller_and_role() -> None:
    messages = [
        Message(role=Role.TOOL, content="a", caller="escalate"),
        Message(role=Role.ASSISTANT, content="b", caller="prompt_llm"),
        Message(role=Role.TOOL, content="c", caller="escalate"),
    ]
    assert [m.content for m in filter_messages(caller="escalate", messages=messages)] == ["a", "c"]
    assert [m.content for m in filter_messages(role=Role.ASSISTANT, messages=messages)] == ["b"]
    assert filter_messages(caller="nobody", messages=messages) == []


def test_truncation_threshold_counts_showings() -> None:
    once = Truncation(threshold=1, severity=Severity.REMOVE)
    assert not once.applies(0)
    assert once.applies(1)
    assert Truncation().applies(0)
    with pytest.raises(ValidationError):
        Truncation(threshold=-1)


def test_a_trusted_message_is_the_message_model_construct_makes() -> None:
    from roboz.models.messages import trusted_message

    given = {
        "role": Role.ASSISTANT,
        "content": '{"action": "stop"}',
        "images": [],
        "caller": "prompt_llm",
        "message_kind": "action",
        "truncation": Truncation(threshold=2),
        "endpoint": "e",
        "model": "m",
        "token_input": 3,
        "token_output": 4,
    }
    fast = trusted_message(**given)  # type: ignore[arg-type]
    slow = Message.model_construct(**given)
    assert fast == slow and list(fast.__dict__) == list(Message.model_fields)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json(exclude_defaults=True) == slow.model_dump_json(
        exclude_defaults=True
    )
    fast.times_shown += 1  # an instance of its own: assignment works as on any message
    assert fast.model_fields_set == slow.model_fields_set | {"times_shown"}
