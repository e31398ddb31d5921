"""Our retry policy for provider calls: capped exponential backoff on 429 and 5xx only.

The SDK's own retries are switched off (``max_retries=0``) so that this is the only policy,
and so tests can see exactly how many requests a server received.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import openai


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ValueError("backoff times must be >= 0")

    def should_retry(self, error: BaseException, attempt: int) -> bool:
        """``attempt`` counts from 0; only rate limits and server errors are worth repeating."""
        return attempt < self.max_retries and retryable_status(error) is not None

    def delay_s(self, error: BaseException, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        if self.jitter:
            # Spread synchronized clients apart, never below half the nominal wait.
            delay *= random.uniform(0.5, 1.0)
        hinted = _retry_after_s(error)
        if hinted is not None:
            delay = max(delay, min(hinted, self.backoff_max_s))
        return delay


def retryable_status(error: BaseException) -> int | None:
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if status == 429 or 500 <= status <= 599:
            return status
    return None


def _retry_after_s(error: BaseException) -> float | None:
    if not isinstance(error, openai.APIStatusError):
        return None
    header = error.response.headers.get("retry-after")
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None  # HTTP-date form: rare for APIs, the exponential delay stands
    return seconds if seconds >= 0 else None
