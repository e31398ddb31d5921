"""The retry policy's decisions: which failures repeat, and how long to wait."""

from __future__ import annotations

import httpx2
import openai
import pytest

from roboz.endpoints.adapters.retry import RetryPolicy


def status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(status, headers=headers or {}, request=request)
    return openai.APIStatusError(f"HTTP {status}", response=response, body=None)


@pytest.mark.parametrize(
    ("status", "retried"),
    [(429, True), (500, True), (503, True), (400, False), (401, False), (404, False)],
)
def test_only_rate_limits_and_server_errors_are_retried(status: int, retried: bool) -> None:
    assert RetryPolicy(max_retries=3).should_retry(status_error(status), attempt=0) is retried


def test_retries_stop_at_max_retries() -> None:
    policy = RetryPolicy(max_retries=2)
    assert policy.should_retry(status_error(500), attempt=1)
    assert not policy.should_retry(status_error(500), attempt=2)


def test_timeouts_and_connection_errors_are_not_retried() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    policy = RetryPolicy(max_retries=3)
    assert not policy.should_retry(openai.APITimeoutError(request=request), attempt=0)
    assert not policy.should_retry(openai.APIConnectionError(request=request), attempt=0)


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(backoff_base_s=0.5, backoff_max_s=3.0, jitter=False)
    error = status_error(503)
    assert [policy.delay_s(error, attempt) for attempt in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_stays_between_half_and_full_delay() -> None:
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=10.0, jitter=True)
    delays = [policy.delay_s(status_error(429), 2) for _ in range(50)]
    assert all(2.0 <= delay <= 4.0 for delay in delays)


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff_base_s=0.1, backoff_max_s=5.0, jitter=False)
    assert policy.delay_s(status_error(429, {"retry-after": "2"}), 0) == 2.0
    assert policy.delay_s(status_error(429, {"retry-after": "120"}), 0) == 5.0
    assert policy.delay_s(status_error(429, {"retry-after": "soon"}), 0) == 0.1
