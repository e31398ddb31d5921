"""Errors raised by concrete endpoints and the secrets loader.

Messages name endpoints, models and environment variables, never credential values.
"""

from __future__ import annotations

from roboz.llm.errors import LLMError


class EndpointError(LLMError):
    """A provider call failed; the message says which endpoint and why."""


class EndpointConfigurationError(EndpointError):
    """The endpoint cannot be used as configured (for example its credential is not set)."""


class EndpointAuthError(EndpointError):
    """The provider refused the credential."""


class EndpointTimeoutError(EndpointError):
    """An attempt took longer than the endpoint's per-attempt timeout."""


class EndpointCancelledError(EndpointError):
    """The caller set the cancel event before the reply arrived."""


class EndpointStatusError(EndpointError):
    """The provider answered with an HTTP error status (after any retries)."""

    def __init__(self, message: str, *, status_code: int, attempts: int) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


class SecretsError(ValueError):
    """An env file or encrypted value could not be read, decrypted or written."""
