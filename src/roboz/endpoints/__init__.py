"""Concrete endpoints, model catalogues and encrypted secrets.

Only OpenAI-compatible APIs are supported. Building an endpoint reads no credential; the
key is read when the endpoint is first used.
"""

from typing import TYPE_CHECKING

from roboz._lazy import lazy_exports

if TYPE_CHECKING:
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
    from roboz.endpoints.specs import ChatModelSpec, ModelPrice, TranscriptionModelSpec
    from roboz.endpoints.transcription import Transcription, TranscriptionEndpoint

# Every name is loaded from its module on first access: the openai SDK (the adapters) takes
# about half a second to import and the catalogue pulls in the runtime and the models, while
# `roboz --help` and `roboz env` need only the env file's constants.
_MODULE_OF = {
    **dict.fromkeys(
        (
            "OpenAICompatibleEndpoint",
            "OpenAICompatibleTranscriptionEndpoint",
            "chat_endpoint",
            "transcription_endpoint",
        ),
        "adapters.openai_compatible",
    ),
    **dict.fromkeys(("Catalogue", "CatalogueError", "load_catalogue"), "catalogue"),
    **dict.fromkeys(
        (
            "DEFAULT_ENCRYPTED_ENV_PATH",
            "ENCRYPTED_NAMESPACE",
            "ENCRYPTED_SUFFIX",
            "decrypt_env_values",
            "encrypt_env",
            "encrypt_env_values",
            "load_secrets",
            "parse_env",
            "serialize_env",
        ),
        "env",
    ),
    **dict.fromkeys(
        (
            "EndpointAuthError",
            "EndpointCancelledError",
            "EndpointConfigurationError",
            "EndpointError",
            "EndpointStatusError",
            "EndpointTimeoutError",
            "SecretsError",
        ),
        "errors",
    ),
    **dict.fromkeys(("ChatModelSpec", "ModelPrice", "TranscriptionModelSpec"), "specs"),
    **dict.fromkeys(("Transcription", "TranscriptionEndpoint"), "transcription"),
}


__getattr__ = lazy_exports(
    __name__, {name: f"{__name__}.{module}" for name, module in _MODULE_OF.items()}
)


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
