"""The OpenAI-compatible endpoint against a real local HTTP server and the real openai client."""

from __future__ import annotations

import threading
import traceback

import pytest

from roboz.endpoints import (
    EndpointAuthError,
    EndpointCancelledError,
    EndpointConfigurationError,
    EndpointStatusError,
    EndpointTimeoutError,
)
from roboz.endpoints.adapters.openai_compatible import chat_endpoint, transcription_endpoint
from roboz.llm import TokenUsage, call_llm_api
from roboz.models import Image, Message, Role
from roboz.runtime.events import Event, EventPipe, LLMDelta, use_pipe
from tests.endpoints.openai_fake import FakeOpenAIServer, Reply

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def endpoint_for(server: FakeOpenAIServer, **overrides: object):  # type: ignore[no-untyped-def]
    options: dict[str, object] = {
        "model": "test-model",
        "max_context_tokens": 8_000,
        "base_url": server.base_url,
        "api_key": "sk-test",
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    options.update(overrides)
    return chat_endpoint(**options)  # type: ignore[arg-type]


def ask(endpoint, text: str = "Hi", **kwargs: object) -> tuple[str, TokenUsage]:  # type: ignore[no-untyped-def]
    return call_llm_api(endpoint, [Message(role=Role.USER, content=text)], **kwargs)  # type: ignore[arg-type]


def test_plain_reply_returns_text_and_usage(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(text="Hello there", input_tokens=5, output_tokens=2))
    endpoint = endpoint_for(openai_server, stream=False)

    text, usage = call_llm_api(
        endpoint,
        [
            Message(role=Role.SYSTEM, content="Be brief."),
            Message(role=Role.USER, content="Hi"),
        ],
    )

    assert text == "Hello there"
    assert usage == TokenUsage(input_tokens=5, output_tokens=2)
    (request,) = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.json()
    assert body["model"] == "test-model"
    assert "stream" not in body
    # Text-only requests keep plain string content.
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]


def test_streamed_reply_delivers_every_delta_in_order(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(chunks=["Hel", "lo ", "world"], input_tokens=3, output_tokens=4))
    deltas: list[str] = []

    text, usage = ask(endpoint_for(openai_server), on_delta=deltas.append)

    assert deltas == ["Hel", "lo ", "world"]
    assert text == "Hello world"
    assert usage == TokenUsage(input_tokens=3, output_tokens=4)
    body = openai_server.requests[0].json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_stream_without_callback_emits_llm_delta_events(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(chunks=["a", "b"]))
    events: list[Event] = []

    with use_pipe(EventPipe([events.append])):
        text, _usage = ask(endpoint_for(openai_server))

    assert text == "ab"
    assert [event.text for event in events if isinstance(event, LLMDelta)] == ["a", "b"]


def test_rate_limit_is_retried_then_succeeds(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(status=429, error_message="slow down"), Reply(text="made it"))

    text, _usage = ask(endpoint_for(openai_server, max_retries=3))

    assert text == "made it"
    assert len(openai_server.requests) == 2


def test_three_server_errors_end_in_a_clear_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(*[Reply(status=500, error_message="upstream exploded")] * 3)

    with pytest.raises(EndpointStatusError) as caught:
        ask(endpoint_for(openai_server, max_retries=2, name="flaky"))

    assert len(openai_server.requests) == 3
    assert caught.value.status_code == 500
    assert caught.value.attempts == 3
    assert str(caught.value) == "endpoint 'flaky': HTTP 500 after 3 attempts: upstream exploded"


def test_client_errors_are_not_retried(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(status=400, error_message="bad model"), Reply(text="unused"))

    with pytest.raises(EndpointStatusError, match="HTTP 400: bad model"):
        ask(endpoint_for(openai_server, max_retries=3))

    assert len(openai_server.requests) == 1


def test_slow_reply_times_out_without_retry(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(delay_s=30), Reply(text="unused"))

    with pytest.raises(EndpointTimeoutError, match="no reply within 0.3s"):
        ask(endpoint_for(openai_server, timeout_s=0.3, stream=False))

    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_healthy_call_succeeds_after_eight_timeouts(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    # Streaming timeouts stall mid-reply, after the first delta; plain ones before any byte.
    stall = Reply(chunks=["partial", "never"], chunk_delay_s=30) if stream else Reply(delay_s=30)
    openai_server.enqueue(*[stall] * 8, Reply(text="still alive"))
    endpoint = endpoint_for(openai_server, timeout_s=0.2, stream=stream)

    for _ in range(8):
        with pytest.raises(EndpointTimeoutError):
            ask(endpoint)
    text, _usage = ask(endpoint)

    assert text == "still alive"
    assert len(openai_server.requests) == 9


def test_abandoned_requests_end_by_themselves(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(*[Reply(delay_s=30)] * 3)
    endpoint = endpoint_for(openai_server, timeout_s=0.2, stream=False)
    for _ in range(3):
        with pytest.raises(EndpointTimeoutError):
            ask(endpoint)

    # Each request thread is bounded by the SDK's own timeout: none outlives its call for long.
    for thread in threading.enumerate():
        if thread.name == "roboz-llm-request":
            thread.join(timeout=30)
            assert not thread.is_alive()


def test_one_endpoint_serves_concurrent_calls(openai_server: FakeOpenAIServer) -> None:
    # Each reply waits until all three requests are in: serialized calls would get 503s.
    openai_server.enqueue(*[Reply(text="together", hold_until_requests=3)] * 3)
    endpoint = endpoint_for(openai_server, timeout_s=60, max_retries=0)
    results: list[str] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(ask(endpoint)[0])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert results == ["together"] * 3


def test_auth_error_never_shows_the_key(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-DO-NOT-LEAK-0123456789abcdef"
    monkeypatch.setenv("TEST_PROVIDER_KEY", secret)
    openai_server.enqueue(Reply(status=401))

    with pytest.raises(EndpointAuthError) as caught:
        ask(endpoint_for(openai_server, api_key=None, api_key_env="TEST_PROVIDER_KEY"))

    # The server really received (and echoed) the key; none of it reaches the error.
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {secret}"
    printed = "".join(traceback.format_exception(caught.value))
    assert secret not in printed
    assert secret not in repr(caught.value)
    assert "TEST_PROVIDER_KEY" in str(caught.value)
    assert "HTTP 401" in str(caught.value)
    assert len(openai_server.requests) == 1


def test_credential_is_read_on_first_use_not_at_construction(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROBOZ_TEST_UNSET_KEY", raising=False)
    endpoint = endpoint_for(openai_server, api_key=None, api_key_env="ROBOZ_TEST_UNSET_KEY")

    with pytest.raises(EndpointConfigurationError, match="ROBOZ_TEST_UNSET_KEY is not set"):
        ask(endpoint)
    assert openai_server.requests == []

    # Setting the variable later (as load_secrets does) is enough.
    monkeypatch.setenv("ROBOZ_TEST_UNSET_KEY", "sk-late")
    ask(endpoint)
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-late"


def test_explicit_key_wins_over_the_environment(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_PROVIDER_KEY", "sk-from-env")

    ask(endpoint_for(openai_server, api_key="sk-explicit", api_key_env="TEST_PROVIDER_KEY"))

    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-explicit"


@pytest.mark.parametrize("stream", [False, True])
def test_images_travel_as_content_parts_on_user_messages(
    openai_server: FakeOpenAIServer, stream: bool
) -> None:
    embedded = Image.from_bytes(PNG, media_type="image/png")
    linked = Image(url="https://example.com/chart.png", detail="high")
    endpoint = endpoint_for(openai_server, accepts_images=True, stream=stream)

    call_llm_api(
        endpoint,
        [
            Message(role=Role.SYSTEM, content="Look closely."),
            Message(role=Role.USER, content="Describe this.", images=[embedded, linked]),
        ],
    )

    system, user = openai_server.requests[0].json()["messages"]
    assert system == {"role": "system", "content": "Look closely."}
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Describe this."},
            {"type": "image_url", "image_url": {"url": embedded.url, "detail": "auto"}},
            {"type": "image_url", "image_url": {"url": linked.url, "detail": "high"}},
        ],
    }


def test_endpoint_without_image_support_sends_plain_text(openai_server: FakeOpenAIServer) -> None:
    image = Image(url="https://example.com/chart.png")

    call_llm_api(
        endpoint_for(openai_server),
        [Message(role=Role.USER, content="Describe this.", images=[image])],
    )

    (user,) = openai_server.requests[0].json()["messages"]
    assert isinstance(user["content"], str)
    assert user["content"].startswith("Describe this.")


def test_direct_image_records_on_a_text_endpoint_are_refused(
    openai_server: FakeOpenAIServer,
) -> None:
    image = Image(url="https://example.com/chart.png")

    with pytest.raises(ValueError, match="does not accept images"):
        endpoint_for(openai_server).complete([{"role": "user", "content": "x", "images": [image]}])
    assert openai_server.requests == []


def test_cancel_before_the_call_sends_nothing(openai_server: FakeOpenAIServer) -> None:
    cancel = threading.Event()
    cancel.set()

    with pytest.raises(EndpointCancelledError):
        ask(endpoint_for(openai_server), cancel=cancel)
    assert openai_server.requests == []


def test_cancel_during_a_slow_request_returns_promptly(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(delay_s=30))
    cancel = threading.Event()

    def cancel_once_the_server_has_the_request() -> None:
        openai_server.request_arrived.wait(10)
        cancel.set()

    threading.Thread(target=cancel_once_the_server_has_the_request, daemon=True).start()
    # The timeout is far beyond the test's patience: only cancellation can end this call.
    with pytest.raises(EndpointCancelledError):
        ask(endpoint_for(openai_server, timeout_s=600, stream=False), cancel=cancel)


def test_no_delta_arrives_after_cancellation(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(chunks=["first", "second", "third"], chunk_delay_s=0.5))
    cancel = threading.Event()
    deltas: list[str] = []

    def on_delta(text: str) -> None:
        deltas.append(text)
        cancel.set()

    with pytest.raises(EndpointCancelledError):
        ask(endpoint_for(openai_server, timeout_s=600), on_delta=on_delta, cancel=cancel)
    # Let the server send (or fail to send) the rest: nothing more may reach the callback.
    assert openai_server.response_finished.wait(30)
    assert deltas == ["first"]


def test_transcription_posts_audio_and_returns_text(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(text="d'oh"))
    endpoint = transcription_endpoint(
        model="whisper-test", base_url=openai_server.base_url, api_key="sk-test"
    )

    result = endpoint.transcribe(b"RIFF....WAVEfmt ", filename="clip.wav")

    assert result.text == "d'oh"
    (request,) = openai_server.requests
    assert request.path == "/v1/audio/transcriptions"
    assert request.headers["content-type"].startswith("multipart/form-data")
    assert b'name="model"' in request.body and b"whisper-test" in request.body
    assert b'filename="clip.wav"' in request.body
