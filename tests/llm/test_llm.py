import pytest
from pydantic import BaseModel

from roboz.llm import (
    LLMReplyError,
    MockLLMEndpoint,
    MockScriptExhaustedError,
    ProviderRecord,
    call_llm_api,
    get_completion,
)
from roboz.models import Image, Message, Role

PHOTO = Image(url="https://example.com/a.png")


def test_mock_replies_in_order_dicts_as_json_and_raises_scripted_errors() -> None:
    mock = MockLLMEndpoint([{"a": 1}, "plain", ValueError("scripted")])
    system = [Message(role=Role.SYSTEM, content="s")]
    assert get_completion(mock, system) == '{"a": 1}'
    assert get_completion(mock, system) == "plain"
    with pytest.raises(ValueError, match="scripted"):
        get_completion(mock, system)
    with pytest.raises(MockScriptExhaustedError, match="all 3 scripted replies were used"):
        get_completion(mock, system)


def test_call_llm_api_returns_reply_and_usage() -> None:
    mock = MockLLMEndpoint(["abcdefgh"])
    reply, usage = call_llm_api(mock, [Message(role=Role.USER, content="x" * 40)])
    assert reply == "abcdefgh"
    assert usage.input_tokens == 10 and usage.output_tokens == 2 and usage.total_tokens == 12


class Verdict(BaseModel):
    answer: bool


def test_validated_completion_repairs_with_the_reason_then_succeeds() -> None:
    mock = MockLLMEndpoint(['{"answer": "maybe"}', '{"answer": true}'])
    assert get_completion(mock, [Message(role=Role.USER, content="?")], Verdict).answer is True
    correction = mock.requests[1][-1]
    assert (
        correction["role"] == "user"
        and "answer: Input should be a valid boolean" in correction["content"]
    )
    assert mock.requests[1][-2] == {
        "role": "assistant",
        "content": '{"answer": "maybe"}',
        "images": [],
    }


def test_validated_completion_gives_up_after_the_bound() -> None:
    mock = MockLLMEndpoint(["x", "y"])
    with pytest.raises(LLMReplyError) as caught:
        get_completion(mock, [Message(role=Role.USER, content="?")], Verdict, max_repairs=1)
    assert caught.value.attempts == 2 and caught.value.last_reply == "y"


def test_tool_results_map_to_the_user_role_and_keep_images() -> None:
    mock = MockLLMEndpoint(["ok"])
    call_llm_api(mock, [Message(role=Role.TOOL, content="{}", caller="t", images=[PHOTO])])
    assert mock.requests[0] == [{"role": "user", "content": "[t result] {}", "images": [PHOTO]}]


def test_endpoints_without_image_support_get_a_note_instead_of_images() -> None:
    mock = MockLLMEndpoint(["ok"], accepts_images=False)
    call_llm_api(
        mock,
        [
            Message(role=Role.USER, content="see", images=[PHOTO]),
            Message(role=Role.USER, content="plain"),
        ],
    )
    first, second = mock.requests[0]
    assert "images" not in first and "1 image(s) omitted" in first["content"]
    assert second == {"role": "user", "content": "plain"}  # text-only keeps its shape


def test_images_on_a_non_user_record_are_refused() -> None:
    def scrubber(messages: object) -> list[ProviderRecord]:
        return [{"role": "assistant", "content": "x", "images": [PHOTO]}]

    mock = MockLLMEndpoint(["ok"], messages_scrubber=scrubber)
    with pytest.raises(ValueError, match="require the user role"):
        call_llm_api(mock, [Message(role=Role.USER, content="x")])


def test_local_endpoints_stream_in_chunks_when_asked() -> None:
    from roboz.llm import FunctionEndpoint

    for endpoint in (
        MockLLMEndpoint(["abcdefg"], chunk_size=3),
        FunctionEndpoint(lambda records: "abcdefg", chunk_size=3),
    ):
        pieces: list[str] = []
        assert endpoint.complete([], on_delta=pieces.append).text == "abcdefg"
        assert pieces == ["abc", "def", "g"]
    whole: list[str] = []
    MockLLMEndpoint([""]).complete([], on_delta=whole.append)
    assert whole == [""]


def test_only_errors_about_the_reply_ask_the_llm_again() -> None:
    from roboz.llm.completion import ReplyRejected, complete_validated

    def strict(text: str) -> str:
        if text == "bad":
            raise ReplyRejected("say good")
        return text

    mock = MockLLMEndpoint(["bad", "good"])
    value, _, repairs = complete_validated(mock, [], strict)
    assert value == "good" and len(repairs) == 2

    def buggy(text: str) -> str:
        raise ValueError("a bug in the parser, not in the reply")

    mock = MockLLMEndpoint(["fine", "never asked"])
    with pytest.raises(ValueError, match="a bug in the parser"):
        complete_validated(mock, [], buggy)
    assert mock.calls == 1
