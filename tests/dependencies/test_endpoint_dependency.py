"""LLM endpoints as dependencies: a rejected key is auth_failed and never printed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest

from roboz.dependencies import DependencyFailure, ExternalDependency, LLMEndpointDependency
from roboz.endpoints.adapters.openai_compatible import chat_endpoint
from roboz.llm import Completion, MockLLMEndpoint, ProviderRecord
from roboz.shed.dependency_health import DependencyHealthMonitor
from tests.endpoints.openai_fake import FakeOpenAIServer, Reply

BAD_KEY = "sk-bad-0123456789abcdefXYZ"


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_rejected_key_is_auth_failed_without_the_key(
    openai_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The fake echoes the rejected key in its error body, as real providers do.
    openai_server.enqueue(Reply(status=401))
    endpoint = chat_endpoint(
        model="m",
        max_context_tokens=1000,
        base_url=openai_server.base_url,
        api_key=BAD_KEY,
        max_retries=0,
    )
    dependency = LLMEndpointDependency(endpoint, secrets=[BAD_KEY], completion_probe=True)
    assert isinstance(dependency, ExternalDependency)
    caplog.set_level(logging.DEBUG)
    record = DependencyHealthMonitor([dependency]).check_all()[dependency.name]

    failure = record.failure
    assert failure is not None
    assert failure.reason_code == "auth_failed"
    assert "rejected the credential" in failure.message
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {BAD_KEY}"
    everything = " ".join(
        [
            failure.message,
            *failure.causes,
            str(failure),
            repr(record),
            caplog.text,
            *capsys.readouterr(),
        ]
    )
    assert BAD_KEY not in everything
    assert "auth_failed" in caplog.text


class StatusError(Exception):
    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class FakeAuthenticationError(Exception):
    pass


class _PlainEndpoint:
    """An endpoint with a cheap check whose error text may leak its key (a careless SDK)."""

    model_name = "plain-model"
    max_context_tokens = 1000
    accepts_images = False
    name = "plain"

    def __init__(self, api_key: str, error: Exception | None) -> None:
        self.api_key = api_key
        self.error = error

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        raise AssertionError("a health check must not send completions unless asked")

    def check(self) -> DependencyFailure | None:
        if self.error is not None:
            raise self.error
        return None


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (StatusError(f"Incorrect API key provided: {BAD_KEY}", 401), "auth_failed"),
        (StatusError("forbidden", 403), "auth_failed"),
        (FakeAuthenticationError(f"bad {BAD_KEY}"), "auth_failed"),
        (StatusError("slow down", 429), "rate_limited"),
        (StatusError("boom", 500), "provider_error"),
        (TimeoutError("no reply"), "timeout"),
        (ConnectionRefusedError("refused"), "unreachable"),
        (ValueError("odd"), "endpoint_error"),
    ],
)
def test_an_endpoints_own_check_is_used_and_classified(error: Exception, reason: str) -> None:
    endpoint = _PlainEndpoint(api_key=BAD_KEY, error=error)
    failure = LLMEndpointDependency(endpoint).check()
    assert failure is not None
    assert failure.reason_code == reason
    assert BAD_KEY not in failure.message  # taken from the endpoint's api_key attribute


def test_a_failure_returned_by_an_endpoint_check_is_redacted() -> None:
    class Reporting(_PlainEndpoint):
        def check(self) -> DependencyFailure | None:
            return DependencyFailure("auth_failed", f"key {BAD_KEY} expired")

    failure = LLMEndpointDependency(Reporting(BAD_KEY, None)).check()
    assert failure is not None and BAD_KEY not in failure.message


def test_the_mock_endpoint_is_always_usable_and_keeps_its_script() -> None:
    mock = MockLLMEndpoint(["only reply"])
    assert LLMEndpointDependency(mock, completion_probe=True).check() is None
    assert mock.remaining == 1


def test_the_endpoints_own_check_lists_models_without_spending_tokens(
    openai_server: FakeOpenAIServer,
) -> None:
    endpoint = chat_endpoint(
        model="m", max_context_tokens=1000, base_url=openai_server.base_url, api_key="sk-good"
    )
    assert LLMEndpointDependency(endpoint).check() is None
    assert [(r.path, r.body) for r in openai_server.requests] == [("/v1/models", b"")]
    # Its own check wins over a completion probe: still no tokens spent.
    assert LLMEndpointDependency(endpoint, completion_probe=True).check() is None
    assert all(r.path == "/v1/models" for r in openai_server.requests)


def test_the_endpoints_own_check_reports_a_rejected_key(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(Reply(status=401))
    endpoint = chat_endpoint(
        model="m",
        max_context_tokens=1000,
        base_url=openai_server.base_url,
        api_key=BAD_KEY,
        max_retries=0,
    )
    failure = LLMEndpointDependency(endpoint).check()
    assert failure is not None and failure.reason_code == "auth_failed"
    assert BAD_KEY not in str(failure) + " ".join(failure.causes)
    assert all(not r.path.endswith("/chat/completions") for r in openai_server.requests)


def test_a_server_without_a_models_endpoint_still_counts_as_reachable(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.enqueue(Reply(status=404))
    endpoint = chat_endpoint(
        model="m",
        max_context_tokens=1000,
        base_url=openai_server.base_url,
        api_key="sk-good",
        max_retries=0,
    )
    assert LLMEndpointDependency(endpoint).check() is None


class _CountingEndpoint:
    """An endpoint with no check of its own: only a completion could probe it."""

    model_name = "counting"
    max_context_tokens = 1000
    accepts_images = False

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        self.calls += 1
        return Completion(text="OK")


def test_without_a_check_an_endpoint_is_not_probed_unless_asked() -> None:
    endpoint = _CountingEndpoint()
    assert LLMEndpointDependency(endpoint).check() is None
    assert endpoint.calls == 0
    assert LLMEndpointDependency(endpoint, completion_probe=True).check() is None
    assert endpoint.calls == 1
