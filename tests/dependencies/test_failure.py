"""DependencyFailure: linked causes are kept, configured secrets never survive."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from roboz.dependencies import (
    REDACTED,
    DependencyFailure,
    check_all,
    format_failure,
    format_report,
    redact,
)

SECRET = "sk-live-Very+Secret/Key=42"


def raise_chain() -> None:
    try:
        try:
            raise ConnectionRefusedError(f"refused while sending Bearer {SECRET}")
        except ConnectionRefusedError:
            # Implicit context: raised while handling the first one.
            raise OSError(f"url https://api.example/v1?key={quote(SECRET)}")  # noqa: B904
    except OSError as error:
        raise RuntimeError("provider unreachable") from error


def test_from_exception_keeps_every_linked_cause_outermost_first() -> None:
    with pytest.raises(RuntimeError) as caught:
        raise_chain()
    failure = DependencyFailure.from_exception(caught.value, reason_code="unreachable")
    assert failure.reason_code == "unreachable"
    assert failure.message.startswith("RuntimeError: provider unreachable (caused by OSError")
    assert len(failure.causes) == 2
    assert failure.causes[0].startswith("OSError: url https://api.example")
    assert failure.causes[1].startswith("ConnectionRefusedError: refused")


def test_secrets_are_redacted_everywhere_including_encoded_forms() -> None:
    with pytest.raises(RuntimeError) as caught:
        raise_chain()
    failure = DependencyFailure.from_exception(
        caught.value, reason_code="unreachable", secrets=[SECRET, None, ""]
    )
    rendered = [failure.message, *failure.causes, str(failure), repr(failure)]
    for text in rendered:
        assert SECRET not in text
        assert "Very+Secret" not in text and "Very%2BSecret" not in text
    assert REDACTED in failure.causes[0]  # raw form
    assert REDACTED in failure.causes[1]  # URL-encoded form


def test_suppressed_context_is_not_reported() -> None:
    try:
        try:
            raise KeyError("internal")
        except KeyError:
            raise ValueError("clean") from None
    except ValueError as error:
        failure = DependencyFailure.from_exception(error)
    assert failure.message == "ValueError: clean"
    assert failure.causes == ()
    assert failure.reason_code == "unexpected_error"


def test_a_cause_cycle_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert len(DependencyFailure.from_exception(first).causes) == 1


def test_a_summary_goes_first_and_is_redacted_too() -> None:
    failure = DependencyFailure.from_exception(
        TimeoutError(), reason_code="timeout", summary=f"probe with {SECRET}", secrets=[SECRET]
    )
    assert failure.message == f"probe with {REDACTED}: TimeoutError"


def test_redact_removes_longer_secrets_whole() -> None:
    assert redact("abc abcdef", ["abc", "abcdef"]) == f"{REDACTED} {REDACTED}"


def test_formatting_for_people() -> None:
    failure = DependencyFailure("executable_missing", "rg is not installed")
    assert format_failure(failure) == "[executable_missing] rg is not installed"
    assert str(failure) == format_failure(failure)
    report = format_report({"executable rg": failure, "helper": None})
    assert report.splitlines() == [
        "executable rg  [executable_missing] rg is not installed",
        "helper         ok",
    ]


class Crashing:
    name = "crashing"

    def check(self) -> DependencyFailure | None:
        raise RuntimeError(f"bug with {SECRET}")

    def secrets(self) -> tuple[str, ...]:
        return (SECRET,)


def test_a_check_that_raises_is_reported_and_redacted() -> None:
    results = check_all([Crashing()])
    failure = results["crashing"]
    assert failure is not None
    assert failure.reason_code == "check_crashed"
    assert SECRET not in failure.message
    assert "checking crashing raised: RuntimeError: bug with" in failure.message
