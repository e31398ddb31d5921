"""Concrete endpoints, model catalogues and encrypted secrets.

Only OpenAI-compatible APIs are supported. Building an endpoint reads no credential; the
key is read when the endpoint is first used.
"""

from typing import TYPE_CHECKING, Any

from roboz.endpoints.catalogue import Catalogue, CatalogueError, load_catalogue
from roboz.endpoints.env import (
    DEFAULT_ENCRYPTED_ENV_PATH,
    ENCRYPTED_NAMESPACE,
    ENCRYPTED_SUFFIX,
    decrypt_env_values,
    encrypt_env,
    encrypt_env_values,
    load_secrets,
    parse_env,
    serialize_env,
)
from roboz.endpoints.errors import (
    EndpointAuthError,
    EndpointCancelledError,
    EndpointConfigurationError,
    EndpointError,
    EndpointStatusError,
    EndpointTimeoutError,
    SecretsError,
)
from roboz.endpoints.specs import ChatModelSpec, ModelPrice, TranscriptionModelSpec
from roboz.endpoints.transcription import Transcription, TranscriptionEndpoint

if TYPE_CHECKING:
    from roboz.endpoints.adapters.openai_compatible import (
        OpenAICompatibleEndpoint,
        OpenAICompatibleTranscriptionEndpoint,
        chat_endpoint,
        transcription_endpoint,
    )

# The openai SDK takes about half a second to import; load_secrets and the CLI do not need
# it, so the adapter names are resolved on first access.
_ADAPTER_NAMES = frozenset(
    {
        "OpenAICompatibleEndpoint",
        "OpenAICompatibleTranscriptionEndpoint",
        "chat_endpoint",
        "transcription_endpoint",
    }
)


def __getattr__(name: str) -> Any:
    if name in _ADAPTER_NAMES:
        from roboz.endpoints.adapters import openai_compatible

        return getattr(openai_compatible, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_ENCRYPTED_ENV_PATH",
    "ENCRYPTED_NAMESPACE",
    "ENCRYPTED_SUFFIX",
    "Catalogue",
    "CatalogueError",
    "ChatModelSpec",
    "EndpointAuthError",
    "EndpointCancelledError",
    "EndpointConfigurationError",
    "EndpointError",
    "EndpointStatusError",
    "EndpointTimeoutError",
    "ModelPrice",
    "OpenAICompatibleEndpoint",
    "OpenAICompatibleTranscriptionEndpoint",
    "SecretsError",
    "Transcription",
    "TranscriptionEndpoint",
    "TranscriptionModelSpec",
    "chat_endpoint",
    "decrypt_env_values",
    "encrypt_env",
    "encrypt_env_values",
    "load_catalogue",
    "load_secrets",
    "parse_env",
    "serialize_env",
    "transcription_endpoint",
]
