"""Token usage and cost of a run's LLM calls.

Every call an agent's run makes to its endpoint (a rejected reply that was repaired
included) is one ``LLMCallUsage``; ``RunUsage`` holds them in order with totals, per
(endpoint, model) breakdowns and, where the endpoint carries a ``ModelPrice``, the cost.
A run records into a ``UsageRecorder`` that is current for its length (a context variable,
so it follows the run into worker threads and its private loop): the agent's own
``prompt_llm`` calls and those a tool makes through ``get_completion``/``call_llm_api``.
A nested agent's run has its own recorder, so its calls belong to its own usage (its own
AgentFinished, ``child.last_usage``), never also to its parent's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Generator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelPrice:
    """What a model costs, in currency units (the catalogue's, e.g. USD) per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            value: object = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{name} must be a non-negative number, got {value!r}")

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of one call (or a total) with these token counts."""
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class LLMCallUsage:
    """One LLM call: where it went, the tokens it used, and its cost (None: no price known).

    ``rejected`` marks a reply the run sent back for repair; its tokens were spent all the same.
    """

    endpoint: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    rejected: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelUsage:
    """The calls of one run to one (endpoint, model), summed."""

    endpoint: str
    model: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    unpriced_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def summary(self) -> str:
        return _summary(
            self.calls, self.input_tokens, self.output_tokens, self.cost, self.unpriced_calls
        )


def _summary(
    calls: int, input_tokens: int, output_tokens: int, cost: float | None, unpriced: int
) -> str:
    text = f"{calls} LLM call(s), {input_tokens} input + {output_tokens} output tokens"
    if cost is not None:
        text += f", cost {cost:.6f}"
        if unpriced:
            text += f" (+{unpriced} call(s) without a price)"
    return text


def _sum_costs(costs: list[float | None]) -> float | None:
    known = [cost for cost in costs if cost is not None]
    return sum(known) if known else None


@dataclass(frozen=True)
class RunUsage:
    """Every LLM call of one run, in order, and their totals.

    ``cost`` sums the calls that have a price; ``unpriced_calls`` says how many had none, so
    a partial figure is never mistaken for the whole (``cost`` is None when no call had one).
    """

    calls: tuple[LLMCallUsage, ...] = field(default=())

    @property
    def llm_calls(self) -> int:
        return len(self.calls)

    @property
    def input_tokens(self) -> int:
        return sum(call.input_tokens for call in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(call.output_tokens for call in self.calls)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> float | None:
        return _sum_costs([call.cost for call in self.calls])

    @property
    def unpriced_calls(self) -> int:
        return sum(1 for call in self.calls if call.cost is None)

    def by_model(self) -> list[ModelUsage]:
        """One entry per (endpoint, model), in the order each was first called."""
        groups: dict[tuple[str, str], list[LLMCallUsage]] = {}
        for call in self.calls:
            groups.setdefault((call.endpoint, call.model), []).append(call)
        return [
            ModelUsage(
                endpoint=endpoint,
                model=model,
                calls=len(calls),
                input_tokens=sum(call.input_tokens for call in calls),
                output_tokens=sum(call.output_tokens for call in calls),
                cost=_sum_costs([call.cost for call in calls]),
                unpriced_calls=sum(1 for call in calls if call.cost is None),
            )
            for (endpoint, model), calls in groups.items()
        ]

    def summary(self) -> str:
        """One line for people: calls, tokens in + out, and the cost when known."""
        return _summary(
            self.llm_calls, self.input_tokens, self.output_tokens, self.cost, self.unpriced_calls
        )


class UsageRecorder:
    """Collects the LLM calls of one run, from whichever thread makes them."""

    def __init__(self) -> None:
        self._calls: list[LLMCallUsage] = []

    def add(self, call: LLMCallUsage) -> None:
        self._calls.append(call)  # list.append is atomic: calls may come from worker threads

    def usage(self) -> RunUsage:
        return RunUsage(calls=tuple(self._calls))


_current_recorder: contextvars.ContextVar[UsageRecorder | None] = contextvars.ContextVar(
    "roboz_usage_recorder", default=None
)


def current_usage_recorder() -> UsageRecorder | None:
    """The recorder of the run in progress, if any."""
    return _current_recorder.get()


@contextlib.contextmanager
def recording_usage(recorder: UsageRecorder) -> Generator[UsageRecorder, None, None]:
    token = _current_recorder.set(recorder)
    try:
        yield recorder
    finally:
        _current_recorder.reset(token)


__all__ = [
    "LLMCallUsage",
    "ModelPrice",
    "ModelUsage",
    "RunUsage",
    "UsageRecorder",
    "current_usage_recorder",
    "recording_usage",
]
