"""Model specs: plain, credential-free descriptions that become endpoints on demand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from roboz.runtime.usage import ModelPrice

if TYPE_CHECKING:
    # Imported when an endpoint is built, so reading catalogues does not load the openai SDK.
    from roboz.endpoints.adapters.openai_compatible import (
        OpenAICompatibleEndpoint,
        OpenAICompatibleTranscriptionEndpoint,
    )


@dataclass(frozen=True)
class ChatModelSpec:
    """A chat model route. ``endpoint()`` builds the endpoint (still without reading a key)."""

    model: str
    max_context_tokens: int
    base_url: str | None = None
    api_key_env: str | None = None
    accepts_images: bool = False
    price: ModelPrice | None = None
    """From the catalogue's optional input_price_per_mtok / output_price_per_mtok."""

    def __post_init__(self) -> None:
        if self.max_context_tokens <= 0:
            raise ValueError(f"{self.model}: max_context_tokens must be positive")

    def endpoint(
        self, *, api_key: str | None = None, name: str | None = None
    ) -> OpenAICompatibleEndpoint:
        from roboz.endpoints.adapters.openai_compatible import chat_endpoint

        return chat_endpoint(
            model=self.model,
            max_context_tokens=self.max_context_tokens,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            api_key=api_key,
            accepts_images=self.accepts_images,
            price=self.price,
            name=name,
        )


@dataclass(frozen=True)
class TranscriptionModelSpec:
    model: str
    base_url: str | None = None
    api_key_env: str | None = None

    def endpoint(
        self, *, api_key: str | None = None, name: str | None = None
    ) -> OpenAICompatibleTranscriptionEndpoint:
        from roboz.endpoints.adapters.openai_compatible import transcription_endpoint

        return transcription_endpoint(
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            api_key=api_key,
            name=name,
        )


__all__ = ["ChatModelSpec", "ModelPrice", "TranscriptionModelSpec"]
