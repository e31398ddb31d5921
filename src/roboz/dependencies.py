"""External dependencies: resources an agent needs at run time and how they report failure.

A resource implements ``check() -> None | DependencyFailure``: None when usable, otherwise a
failure with a stable ``reason_code`` (for programs) and a readable message (for people) that
never contains a credential. Each resource owns its explanation; monitors only relay it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import quote, quote_plus

from roboz.llm import EndpointLike, MockLLMEndpoint

REDACTED = "[REDACTED]"
# Bound on linked causes kept from an exception chain; real chains are short, loops are not.
_MAX_CAUSES = 16


@runtime_checkable
class ExternalDependency(Protocol):
    """Something outside the process an agent relies on (a socket, an executable, an API)."""

    @property
    def name(self) -> str:
        """A short stable label, e.g. ``helper socket /run/roboz-helper/helper.sock``."""
        ...

    def check(self) -> DependencyFailure | None:
        """None when usable; otherwise why not. Must not raise for an expected failure."""
        ...


@dataclass(frozen=True)
class DependencyFailure:
    """Why a dependency is unusable. ``causes`` are the linked exceptions, outermost first."""

    reason_code: str
    message: str
    causes: tuple[str, ...] = field(default=())

    @classmethod
    def from_exception(
        cls,
        error: BaseException,
        *,
        reason_code: str = "unexpected_error",
        secrets: Iterable[str | None] = (),
        summary: str | None = None,
    ) -> DependencyFailure:
        """A failure describing ``error`` and its ``__cause__``/``__context__`` chain.

        Every ``secrets`` value is removed from the message and the causes, also where it
        appears URL- or JSON-encoded. ``summary`` is a sentence to put before the error text.
        """
        texts = [describe_exception(link) for link in exception_chain(error)]
        head = texts[0] if summary is None else f"{summary}: {texts[0]}"
        message = head
        if len(texts) > 1:
            message += " (caused by " + "; caused by ".join(texts[1:]) + ")"
        return cls(
            reason_code=reason_code,
            message=redact(message, secrets),
            causes=tuple(redact(text, secrets) for text in texts[1:]),
        )

    def redacted(self, secrets: Iterable[str | None]) -> DependencyFailure:
        """The same failure with ``secrets`` removed (for failures built by third parties)."""
        keep = list(secrets)
        return DependencyFailure(
            reason_code=self.reason_code,
            message=redact(self.message, keep),
            causes=tuple(redact(cause, keep) for cause in self.causes),
        )

    def __str__(self) -> str:
        return format_failure(self)


def exception_chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions linked to it, following what a traceback would show."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < _MAX_CAUSES:
        if any(current is seen for seen in chain):
            break
        chain.append(current)
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__:
            current = None
        else:
            current = current.__context__
    return chain


def describe_exception(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (and its URL/JSON-encoded forms) replaced by a marker."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        forms |= {
            secret,
            quote(secret),
            quote(secret, safe=""),
            quote_plus(secret),
            json.dumps(secret)[1:-1],
        }
    # Longest first so that a secret containing another is removed whole.
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text


def format_failure(failure: DependencyFailure) -> str:
    return f"[{failure.reason_code}] {failure.message}"


def format_report(results: Mapping[str, DependencyFailure | None]) -> str:
    """One line per dependency: ``ok`` or its failure, for logs and CLIs."""
    width = max((len(name) for name in results), default=0)
    return "\n".join(
        f"{name.ljust(width)}  {'ok' if failure is None else format_failure(failure)}"
        for name, failure in results.items()
    )


def check_all(dependencies: Iterable[ExternalDependency]) -> dict[str, DependencyFailure | None]:
    """Check each dependency once; a check that raises is reported as ``check_crashed``."""
    results: dict[str, DependencyFailure | None] = {}
    for dependency in dependencies:
        results[dependency.name] = safe_check(dependency)
    return results


def safe_check(dependency: ExternalDependency) -> DependencyFailure | None:
    try:
        return dependency.check()
    except Exception as error:
        # The resource broke its contract, so it cannot tell us which values are secret; its
        # own secrets() (when it offers one) is the best we can do.
        secrets = getattr(dependency, "secrets", lambda: ())()
        return DependencyFailure.from_exception(
            error,
            reason_code="check_crashed",
            secrets=secrets,
            summary=f"checking {dependency.name} raised",
        )


# -- LLM endpoints ----------------------------------------------------------------------------
# Defined here rather than in the Shed because every agent definition has an endpoint and the
# deployment layer (which sits below the Shed) reports it among its dependencies.

_AUTH_STATUS = {401, 403}


class LLMEndpointDependency:
    """An LLM endpoint, checked with the endpoint's own cheap ``check()`` when it has one.

    Without one the endpoint is not probed unless ``completion_probe=True``, which sends a
    one-line request (it costs a few tokens, so it is opt-in); otherwise it is reported usable.
    A MockLLMEndpoint is always usable and never consumes a scripted reply. ``secrets`` adds
    credentials to redact besides the endpoint's own ``api_key`` attribute.
    """

    def __init__(
        self,
        endpoint: EndpointLike,
        *,
        secrets: Iterable[str] = (),
        completion_probe: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self._secrets = tuple(secrets)
        self.completion_probe = completion_probe

    @property
    def name(self) -> str:
        label = getattr(self.endpoint, "name", None) or self.endpoint.model_name
        model = self.endpoint.model_name
        return f"LLM endpoint {label}" if label == model else f"LLM endpoint {label} ({model})"

    def secrets(self) -> tuple[str, ...]:
        found = list(self._secrets)
        for attribute in ("api_key", "_api_key"):
            value = getattr(self.endpoint, attribute, None)
            if isinstance(value, str) and value:
                found.append(value)
        return tuple(found)

    def check(self) -> DependencyFailure | None:
        if isinstance(self.endpoint, MockLLMEndpoint):
            return None
        try:
            result = self._probe()
        except Exception as error:
            return DependencyFailure.from_exception(
                error,
                reason_code=classify_endpoint_error(error),
                secrets=self.secrets(),
                summary=f"{self.name} (model {self.endpoint.model_name}) is not usable",
            )
        if isinstance(result, DependencyFailure):
            return result.redacted(self.secrets())
        return None

    def _probe(self) -> object:
        own_check = getattr(self.endpoint, "check", None)
        if callable(own_check):
            return own_check()
        if self.completion_probe:
            self.endpoint.complete([{"role": "user", "content": "Reply with the word OK."}])
        return None

    # Two wrappers of the same endpoint instance are the same dependency.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, LLMEndpointDependency) and other.endpoint is self.endpoint

    def __hash__(self) -> int:
        return id(self.endpoint)

    def __repr__(self) -> str:
        return f"LLMEndpointDependency({self.endpoint!r})"


def classify_endpoint_error(error: BaseException) -> str:
    """A reason code from the error chain, by status code or class name (no SDK imports)."""
    for link in exception_chain(error):
        status = getattr(link, "status_code", None)
        names = {cls.__name__ for cls in type(link).__mro__}
        if status in _AUTH_STATUS or any("Auth" in name for name in names):
            return "auth_failed"
        if any("Timeout" in name for name in names) or isinstance(link, TimeoutError):
            return "timeout"
        if any("Configuration" in name for name in names):
            return "misconfigured"
        if any("Connection" in name for name in names) or isinstance(link, ConnectionError):
            return "unreachable"
        if isinstance(status, int) and status == 429:
            return "rate_limited"
        if isinstance(status, int):
            return "provider_error"
    return "endpoint_error"
