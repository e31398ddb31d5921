"""Endpoints for any server that speaks the OpenAI chat-completions (and transcription) API."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import openai

from roboz.endpoints.adapters.attempt import AttemptGate
from roboz.endpoints.adapters.client import LazyClient, acall_with_policy, call_with_policy
from roboz.endpoints.adapters.content import to_openai_messages
from roboz.endpoints.adapters.retry import RetryPolicy
from roboz.endpoints.errors import EndpointError
from roboz.endpoints.transcription import Transcription, TranscriptionEndpoint
from roboz.llm.endpoint import Completion, DeltaCallback, LLMEndpoint, TokenUsage
from roboz.llm.records import MessagesScrubber, ProviderRecord
from roboz.runtime.events import LLMDelta, current_pipe, emit
from roboz.runtime.usage import ModelPrice

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 3


class OpenAICompatibleEndpoint(LLMEndpoint):
    """A chat model behind an OpenAI-compatible server (``chat_endpoint`` is this class).

    No client is built and no credential read until the first call. ``api_key`` wins over
    ``api_key_env``; without either, ``OPENAI_API_KEY`` is used for the default OpenAI URL
    and no key at all for a custom ``base_url``.

    ``stream=None`` streams when someone listens (an ``on_delta`` callback, or a current
    event pipe with a sink that consumes deltas) and asks for a single reply otherwise.
    Deltas go to ``on_delta`` when given, else to the current event pipe as LLMDelta events
    (never to both, so a caller that forwards deltas itself sees each once). ``price`` lets
    runs report what their calls cost (catalogue endpoints get it from models.json).
    """

    def __init__(
        self,
        *,
        model: str,
        max_context_tokens: int,
        base_url: str | None = None,
        api_key_env: str | None = None,
        api_key: str | None = None,
        accepts_images: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        stream: bool | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        default_headers: dict[str, str] | None = None,
        messages_scrubber: MessagesScrubber | None = None,
        name: str | None = None,
        price: ModelPrice | None = None,
    ) -> None:
        if max_context_tokens <= 0:
            raise ValueError("max_context_tokens must be positive")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        super().__init__(
            model_name=model,
            max_context_tokens=max_context_tokens,
            accepts_images=accepts_images,
            messages_scrubber=messages_scrubber,
            name=name,
            price=price,
        )
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retry_policy = RetryPolicy(
            max_retries=max_retries, backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s
        )
        self.stream = stream
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.extra_body = dict(extra_body or {})
        self._client = LazyClient(
            label=f"endpoint {self.name!r}",
            base_url=base_url,
            api_key_env=api_key_env,
            api_key=api_key,
            timeout_s=timeout_s,
            default_headers=default_headers,
        )

    @property
    def api_key_env(self) -> str | None:
        return self._client.api_key_env

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        messages, deliver = self._prepare(records, on_delta)

        def send(sdk: openai.OpenAI, gate: AttemptGate) -> Completion:
            if deliver is not None:
                return self._send_streamed(sdk, messages, deliver, gate)
            return self._completion(
                sdk.chat.completions.create(**self._arguments(messages, stream=False))
            )

        return call_with_policy(
            self._client,
            send,
            policy=self.retry_policy,
            timeout_s=self.timeout_s,
            cancel=cancel,
        )

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        """``complete`` on the SDK's async client: no thread, and cancelling the awaiting
        task cancels the request in flight."""
        messages, deliver = self._prepare(records, on_delta)

        async def send(sdk: openai.AsyncOpenAI) -> Completion:
            # create() is overloaded on a literal stream=, which **arguments hides: read as Any.
            if deliver is None:
                response = cast(
                    Any,
                    await sdk.chat.completions.create(**self._arguments(messages, stream=False)),
                )
                return self._completion(response)
            state = _StreamState(self.model_name)
            stream = cast(
                Any, await sdk.chat.completions.create(**self._arguments(messages, stream=True))
            )
            try:
                async for chunk in stream:
                    text = state.add(chunk)
                    if text:
                        deliver(text)
            finally:
                await stream.close()
            return state.completion()

        return await acall_with_policy(
            self._client,
            send,
            policy=self.retry_policy,
            timeout_s=self.timeout_s,
            cancel=cancel,
        )

    def _prepare(
        self, records: Sequence[ProviderRecord], on_delta: DeltaCallback | None
    ) -> tuple[list[dict[str, Any]], DeltaCallback | None]:
        """The SDK messages, and where deltas go when this call streams (None: it does not)."""
        messages = to_openai_messages(
            records, accepts_images=self.accepts_images, endpoint=self.name
        )
        streaming = self.stream
        if streaming is None:
            pipe = current_pipe()
            streaming = on_delta is not None or (pipe is not None and pipe.wants_deltas)
        return messages, (on_delta or _emit_delta) if streaming else None

    def check(self) -> None:
        """A cheap health check: list the server's models, which needs the credential and
        spends no tokens. Raises what a completion would (auth, timeout, connection errors).

        A server without a models endpoint (404) answered, so it counts as reachable.
        """

        def send(sdk: openai.OpenAI, gate: AttemptGate) -> None:
            try:
                sdk.models.list()
            except openai.NotFoundError:
                return

        call_with_policy(
            self._client, send, policy=self.retry_policy, timeout_s=self.timeout_s, cancel=None
        )

    def _completion(self, response: Any) -> Completion:
        if not response.choices:
            raise EndpointError(f"endpoint {self.name!r}: the reply had no choices")
        usage = response.usage
        return Completion(
            text=response.choices[0].message.content or "",
            usage=TokenUsage(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
            ),
            model=response.model or self.model_name,
        )

    def _send_streamed(
        self,
        sdk: openai.OpenAI,
        messages: list[dict[str, Any]],
        deliver: DeltaCallback,
        gate: AttemptGate,
    ) -> Completion:
        state = _StreamState(self.model_name)
        stream = cast(Any, sdk.chat.completions.create(**self._arguments(messages, stream=True)))
        try:
            for chunk in stream:
                text = state.add(chunk)
                if text and not gate.deliver(deliver, text):
                    break  # the caller gave up: stop reading and free the connection
        finally:
            stream.close()
        return state.completion()

    def _arguments(self, messages: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "timeout": self.timeout_s,
        }
        if stream:
            arguments["stream"] = True
            # Without this, streamed replies carry no token usage.
            arguments["stream_options"] = {"include_usage": True}
        if self.temperature is not None:
            arguments["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            arguments["max_tokens"] = self.max_output_tokens
        if self.extra_body:
            arguments["extra_body"] = self.extra_body
        return arguments


def _emit_delta(text: str) -> None:
    emit(LLMDelta(text=text))


class _StreamState:
    """Text, usage and model gathered from the chunks of one streamed reply."""

    def __init__(self, model: str) -> None:
        self.pieces: list[str] = []
        self.usage = TokenUsage()
        self.model = model

    def add(self, chunk: Any) -> str | None:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = TokenUsage(
                input_tokens=chunk.usage.prompt_tokens,
                output_tokens=chunk.usage.completion_tokens,
            )
        text: str | None = chunk.choices[0].delta.content if chunk.choices else None
        if text:
            self.pieces.append(text)
        return text

    def completion(self) -> Completion:
        return Completion(text="".join(self.pieces), usage=self.usage, model=self.model)


class OpenAICompatibleTranscriptionEndpoint(TranscriptionEndpoint):
    """A speech-to-text model behind an OpenAI-compatible ``/audio/transcriptions`` route
    (``transcription_endpoint`` is this class); as lazy as the chat endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        default_headers: dict[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        super().__init__(model_name=model, name=name)
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retry_policy = RetryPolicy(
            max_retries=max_retries, backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s
        )
        self._client = LazyClient(
            label=f"endpoint {self.name!r}",
            base_url=base_url,
            api_key_env=api_key_env,
            api_key=api_key,
            timeout_s=timeout_s,
            default_headers=default_headers,
        )

    @property
    def api_key_env(self) -> str | None:
        return self._client.api_key_env

    def transcribe(
        self,
        audio: bytes | Path,
        *,
        filename: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Transcription:
        if isinstance(audio, Path):
            data, filename = audio.read_bytes(), filename or audio.name
        else:
            data = audio
        upload = (filename or "audio.wav", data)
        options: dict[str, Any] = {"timeout": self.timeout_s}
        if language is not None:
            options["language"] = language
        if prompt is not None:
            options["prompt"] = prompt

        def send(sdk: openai.OpenAI, gate: AttemptGate) -> Transcription:
            result = cast(
                Any,
                sdk.audio.transcriptions.create(
                    file=upload, model=self.model_name, response_format="json", **options
                ),
            )
            text: str = result if isinstance(result, str) else getattr(result, "text", "")
            return Transcription(text=text, model=self.model_name)

        return call_with_policy(
            self._client, send, policy=self.retry_policy, timeout_s=self.timeout_s, cancel=cancel
        )


# One way to build each: the factory names the seed shows are the constructors themselves,
# so their keywords are declared once.
chat_endpoint = OpenAICompatibleEndpoint
transcription_endpoint = OpenAICompatibleTranscriptionEndpoint


__all__ = [
    "OpenAICompatibleEndpoint",
    "OpenAICompatibleTranscriptionEndpoint",
    "TranscriptionEndpoint",
    "chat_endpoint",
    "transcription_endpoint",
]
