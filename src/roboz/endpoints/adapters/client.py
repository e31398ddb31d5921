"""The lazily built OpenAI client and the guarded call loop shared by every adapter endpoint.

Nothing here runs at construction: the credential is read and the SDK client built on the
first request, so importing and inspecting catalogues needs no key. Errors are translated
into roboz endpoint errors whose messages never contain the credential.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import openai

from roboz.endpoints.adapters.attempt import (
    CANCEL_POLL_S,
    AttemptCancelled,
    AttemptGate,
    AttemptTimedOut,
    run_async_attempt,
    run_attempt,
)
from roboz.endpoints.adapters.retry import RetryPolicy
from roboz.endpoints.errors import (
    EndpointAuthError,
    EndpointCancelledError,
    EndpointConfigurationError,
    EndpointError,
    EndpointStatusError,
    EndpointTimeoutError,
)

T = TypeVar("T")

# Local OpenAI-compatible servers (vLLM, llama.cpp, Ollama) often need no key, but the SDK
# insists on one; this placeholder is sent only when no credential was configured at all.
_NO_KEY = "no-key-configured"
_SERVER_MESSAGE_LIMIT = 300


class LazyClient:
    """Builds one SDK client per endpoint on first use; thread-safe."""

    def __init__(
        self,
        *,
        label: str,
        base_url: str | None,
        api_key_env: str | None,
        api_key: str | None,
        timeout_s: float,
        default_headers: dict[str, str] | None = None,
    ) -> None:
        if api_key_env is None and api_key is None and base_url is None:
            api_key_env = "OPENAI_API_KEY"  # the SDK's own default provider and variable
        self.label = label
        self.base_url = base_url
        self.api_key_env = api_key_env
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._default_headers = dict(default_headers or {})
        self._client: openai.OpenAI | None = None
        # An async client's connections belong to the loop that opened them: one per loop.
        self._async_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, openai.AsyncOpenAI
        ] = weakref.WeakKeyDictionary()
        self._secret: str | None = None
        self._lock = threading.Lock()

    def _options(self) -> dict[str, Any]:
        if self._secret is None:
            self._secret = self._read_credential()
        return {
            "api_key": self._secret,
            "base_url": self.base_url,
            "timeout": self._timeout_s,
            # Our RetryPolicy is the only retry loop; see retry.py.
            "max_retries": 0,
            "default_headers": self._default_headers or None,
        }

    def get(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                self._client = openai.OpenAI(**self._options())
            return self._client

    def get_async(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._async_clients[loop] = openai.AsyncOpenAI(**self._options())
            return client

    def _read_credential(self) -> str:
        if self._api_key is not None:
            return self._api_key
        if self.api_key_env is None:
            return _NO_KEY
        value = os.environ.get(self.api_key_env)
        if not value:
            raise EndpointConfigurationError(
                f"{self.label}: the credential variable {self.api_key_env} is not set; "
                "export it or call roboz.endpoints.load_secrets() first"
            )
        return value

    def redact(self, text: str) -> str:
        if self._secret and self._secret != _NO_KEY:
            text = text.replace(self._secret, "***")
        return text

    @property
    def credential_source(self) -> str:
        return self.api_key_env if self._api_key is None and self.api_key_env else "api_key"


def call_with_policy(
    client: LazyClient,
    request: Callable[[openai.OpenAI, AttemptGate], T],
    *,
    policy: RetryPolicy,
    timeout_s: float,
    cancel: threading.Event | None,
) -> T:
    """Run ``request`` with a per-attempt deadline, cancellation and our retry policy."""
    sdk = client.get()
    attempt = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise EndpointCancelledError(f"{client.label}: cancelled")
        try:
            return run_attempt(lambda gate: request(sdk, gate), timeout_s=timeout_s, cancel=cancel)
        except Exception as error:
            delay = _retry_delay(client, error, attempt, policy=policy, timeout_s=timeout_s)
        if cancel is None:
            time.sleep(delay)
        elif cancel.wait(delay):
            raise EndpointCancelledError(f"{client.label}: cancelled") from None
        attempt += 1


async def acall_with_policy(
    client: LazyClient,
    request: Callable[[openai.AsyncOpenAI], Awaitable[T]],
    *,
    policy: RetryPolicy,
    timeout_s: float,
    cancel: threading.Event | None,
) -> T:
    """``call_with_policy`` for the async client: the same deadline, cancellation (by the
    event or by cancelling the awaiting task) and retries, without a thread."""
    sdk = client.get_async()
    attempt = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise EndpointCancelledError(f"{client.label}: cancelled")
        try:
            return await run_async_attempt(request(sdk), timeout_s=timeout_s, cancel=cancel)
        except Exception as error:
            delay = _retry_delay(client, error, attempt, policy=policy, timeout_s=timeout_s)
        if await _cancelled_while_waiting(cancel, delay):
            raise EndpointCancelledError(f"{client.label}: cancelled") from None
        attempt += 1


async def _cancelled_while_waiting(cancel: threading.Event | None, delay: float) -> bool:
    deadline = time.monotonic() + delay
    while (remaining := deadline - time.monotonic()) > 0:
        if cancel is not None and cancel.is_set():
            return True
        await asyncio.sleep(min(remaining, CANCEL_POLL_S))
    return cancel is not None and cancel.is_set()


def _retry_delay(
    client: LazyClient, error: Exception, attempt: int, *, policy: RetryPolicy, timeout_s: float
) -> float:
    """How long to wait before retrying ``error``; raises the roboz error when not to retry.

    Called inside ``except``; errors are raised ``from None`` because the SDK's exceptions
    hold the request, and so the credential header.
    """
    if isinstance(error, AttemptCancelled):
        raise EndpointCancelledError(f"{client.label}: cancelled") from None
    if isinstance(error, AttemptTimedOut | openai.APITimeoutError):
        raise EndpointTimeoutError(
            f"{client.label}: no reply within {timeout_s:g}s (attempt {attempt + 1})"
        ) from None
    if isinstance(error, openai.APIStatusError):
        if policy.should_retry(error, attempt):
            return policy.delay_s(error, attempt)
        raise _status_error(client, error, attempt + 1) from None
    if isinstance(error, openai.APIConnectionError):
        raise EndpointError(
            f"{client.label}: cannot reach {client.base_url or 'the provider'}: "
            f"{client.redact(str(error))}"
        ) from None
    if isinstance(error, openai.OpenAIError):
        raise EndpointError(f"{client.label}: {client.redact(str(error))}") from None
    raise error


def _status_error(client: LazyClient, error: openai.APIStatusError, attempts: int) -> EndpointError:
    status = error.status_code
    if status in (401, 403):
        # Providers echo (parts of) the rejected key in their message; say nothing of it.
        return EndpointAuthError(
            f"{client.label}: the provider rejected the credential from "
            f"{client.credential_source} (HTTP {status})"
        )
    detail = client.redact(_server_message(error))
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return EndpointStatusError(
        f"{client.label}: HTTP {status}{tries}: {detail}", status_code=status, attempts=attempts
    )


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body
    message: object = None
    if isinstance(body, dict):
        fields = cast("dict[str, object]", body)
        inner = fields.get("error", fields)
        message = (
            cast("dict[str, object]", inner).get("message") if isinstance(inner, dict) else inner
        )
    text = str(message) if message else error.message
    return text if len(text) <= _SERVER_MESSAGE_LIMIT else text[:_SERVER_MESSAGE_LIMIT] + "..."
