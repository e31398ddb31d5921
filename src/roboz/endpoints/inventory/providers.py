# Generated from models.json by `roboz inventory generate`. Do not edit: edit the
# JSON and regenerate. Only files carrying the next line are ever replaced.
# roboz: generated-file (roboz inventory generate)
"""Typed endpoints of this model catalogue; importing it reads no credentials."""

from __future__ import annotations

from roboz.endpoints.adapters import openai_compatible as _openai_compatible
from roboz.endpoints.specs import ModelPrice
from roboz.endpoints.transcription import TranscriptionEndpoint
from roboz.llm.endpoint import LLMEndpoint


class OpenrouterModels:
    """Models of the openrouter provider."""

    def __init__(self) -> None:
        self.z_ai__glm_5_3: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="z-ai/glm-5.3",
            max_context_tokens=202752,
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
            name="openrouter.z_ai__glm_5_3",
        )
        self.openai__gpt_5_mini: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="openai/gpt-5-mini",
            max_context_tokens=400000,
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
            name="openrouter.openai__gpt_5_mini",
        )
        self.qwen__qwen3_coder: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="qwen/qwen3-coder",
            max_context_tokens=262144,
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
            name="openrouter.qwen__qwen3_coder",
        )


class CerebrasModels:
    """Models of the cerebras provider."""

    def __init__(self) -> None:
        self.gpt_oss_120b: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="gpt-oss-120b",
            max_context_tokens=131072,
            base_url="https://api.cerebras.ai/v1",
            api_key_env="CEREBRAS_API_KEY",
            name="cerebras.gpt_oss_120b",
        )
        self.llama3_1_8b: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="llama3.1-8b",
            max_context_tokens=32768,
            base_url="https://api.cerebras.ai/v1",
            api_key_env="CEREBRAS_API_KEY",
            name="cerebras.llama3_1_8b",
        )


class GroqModels:
    """Models of the groq provider."""

    def __init__(self) -> None:
        self.llama_3_3_70b_versatile: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="llama-3.3-70b-versatile",
            max_context_tokens=131072,
            base_url="https://api.groq.com/openai/v1",
            api_key_env="GROQ_API_KEY",
            name="groq.llama_3_3_70b_versatile",
        )
        self.openai__gpt_oss_20b: LLMEndpoint = _openai_compatible.chat_endpoint(
            model="openai/gpt-oss-20b",
            max_context_tokens=131072,
            base_url="https://api.groq.com/openai/v1",
            api_key_env="GROQ_API_KEY",
            name="groq.openai__gpt_oss_20b",
        )
        self.whisper_large_v3: TranscriptionEndpoint = _openai_compatible.transcription_endpoint(
            model="whisper-large-v3",
            base_url="https://api.groq.com/openai/v1",
            api_key_env="GROQ_API_KEY",
            name="groq.whisper_large_v3",
        )


openrouter = OpenrouterModels()
cerebras = CerebrasModels()
groq = GroqModels()

# Per-token prices from the catalogue, by endpoint name (currency units per
# million tokens); models without prices are not listed.
PRICES: dict[str, ModelPrice] = {}

__all__ = [
    "cerebras",
    "groq",
    "openrouter",
]
