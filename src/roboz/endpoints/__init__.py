"""Concrete endpoints, model catalogues and encrypted secrets.

Only OpenAI-compatible APIs are supported. Building an endpoint reads no credential; the
key is read when the endpoint is first used.
"""

from roboz.endpoints.adapters.openai_compatible import (
    OpenAICompatibleEndpoint,
    OpenAICompatibleTranscriptionEndpoint,
    chat_endpoint,
    transcription_endpoint,
)
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
from roboz.endpoints.specs import ChatModelSpec, TranscriptionModelSpec
from roboz.endpoints.transcription import Transcription, TranscriptionEndpoint

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
