"""Catalogue attributes are typed endpoints, not Any."""

from __future__ import annotations

from typing import assert_type

from roboz.endpoints import Catalogue, ModelPrice
from roboz.endpoints.inventory import cerebras, groq, openrouter
from roboz.endpoints.inventory.providers import PRICES
from roboz.endpoints.transcription import TranscriptionEndpoint
from roboz.llm import LLMEndpoint

assert_type(openrouter.z_ai__glm_5_3, LLMEndpoint)
assert_type(cerebras.gpt_oss_120b, LLMEndpoint)
assert_type(groq.whisper_large_v3, TranscriptionEndpoint)

# A transcription route is not a chat endpoint, and the other way round.
chat: LLMEndpoint = groq.whisper_large_v3  # type: ignore[assignment]
speech: TranscriptionEndpoint = openrouter.z_ai__glm_5_3  # type: ignore[assignment]

# A typo is an error, not an Any.
openrouter.z_ai__glm_5_4  # type: ignore[attr-defined]  # noqa: B018


def spec_price(catalogue: Catalogue) -> None:
    # Optional per-model prices; the generated module lists them by endpoint name.
    assert_type(catalogue.chat_models()[("svc", "chat")].price, ModelPrice | None)
    assert_type(PRICES, dict[str, ModelPrice])
