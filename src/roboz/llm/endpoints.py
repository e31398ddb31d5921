"""Concrete endpoints that need no provider: the scripted mock used by examples and tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

from roboz.llm.endpoint import Completion, DeltaCallback, LLMEndpoint, TokenUsage
from roboz.llm.errors import MockScriptExhaustedError
from roboz.llm.records import MessagesScrubber, ProviderRecord
from roboz.runtime.usage import ModelPrice

MockReply = dict[str, Any] | str | BaseException
ReplyFunction = Callable[[list[ProviderRecord]], "dict[str, Any] | str | Completion"]


def _estimate_tokens(text: str) -> int:
    # Roughly four characters a token; good enough for usage figures of a mock.
    return (len(text) + 3) // 4


def _reply_text(reply: dict[str, Any] | str) -> str:
    return reply if isinstance(reply, str) else json.dumps(reply)


class _LocalEndpoint(LLMEndpoint):
    """What the provider-free endpoints share: how a reply streams, and async runs.

    ``chunk_size`` streams each reply in pieces of that many characters, as a real provider
    does (None: in one piece). ``acomplete`` calls ``complete`` on the loop (replying never
    blocks), so a subclass that overrides ``complete`` is served the same way in async runs.
    """

    chunk_size: int | None = None

    def _stream(self, text: str, on_delta: DeltaCallback | None) -> None:
        if on_delta is None:
            return
        if not self.chunk_size or len(text) <= self.chunk_size:
            on_delta(text)
            return
        for start in range(0, len(text), self.chunk_size):
            on_delta(text[start : start + self.chunk_size])

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        return self.complete(records, on_delta=on_delta, cancel=cancel)


class MockLLMEndpoint(_LocalEndpoint):
    """Replies from a script, in order: a dict is sent as JSON, a str as is, an exception raised.

    Every request's records are kept in ``requests`` so tests can see what the LLM was shown;
    ``chunk_size`` streams each reply in pieces. In async runs ``acomplete`` calls
    ``complete`` on the loop, so keep an override of ``complete`` non-blocking or override
    ``acomplete`` too.
    """

    def __init__(
        self,
        responses: Iterable[MockReply] = (),
        *,
        model_name: str = "mock",
        max_context_tokens: int = 128_000,
        accepts_images: bool = True,
        messages_scrubber: MessagesScrubber | None = None,
        keep_requests: bool = True,
        estimate_usage: bool = True,
        price: ModelPrice | None = None,
        chunk_size: int | None = None,
    ) -> None:
        super().__init__(
            model_name=model_name,
            max_context_tokens=max_context_tokens,
            accepts_images=accepts_images,
            messages_scrubber=messages_scrubber,
            name="mock",
            price=price,
        )
        self.chunk_size = chunk_size
        self.responses: list[MockReply] = list(responses)
        self.requests: list[list[ProviderRecord]] = []
        self.calls = 0
        self._keep_requests = keep_requests
        self._estimate_usage = estimate_usage
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return len(self.responses) - self.calls

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        with self._lock:
            if self.calls >= len(self.responses):
                raise MockScriptExhaustedError(
                    f"MockLLMEndpoint has no reply left: all {len(self.responses)} scripted "
                    "replies were used; add more responses to its script"
                )
            reply = self.responses[self.calls]
            self.calls += 1
            if self._keep_requests:
                self.requests.append(list(records))
        if isinstance(reply, BaseException):
            raise reply
        text = _reply_text(reply)
        self._stream(text, on_delta)
        if not self._estimate_usage:
            return Completion(text=text, model=self.model_name)
        # Like a real provider, the estimate reads the whole prompt; benchmarks of the agent
        # loop's own overhead switch it off with estimate_usage=False.
        prompt_chars = sum(map(len, map(itemgetter("content"), records)))
        return Completion(
            text=text,
            usage=TokenUsage(
                input_tokens=(prompt_chars + 3) // 4, output_tokens=_estimate_tokens(text)
            ),
            model=self.model_name,
        )


class FunctionEndpoint(_LocalEndpoint):
    """Computes each reply from what the LLM would be shown: ``function(records)``.

    The function returns a dict (sent as JSON), a str, or a whole Completion (to set usage),
    or raises. Records are the provider records of the call, system prompt first, so a test
    can answer from the conversation instead of scripting replies in order. In async runs the
    function is called on the loop, so it should not block.
    """

    def __init__(
        self,
        function: ReplyFunction,
        *,
        model_name: str = "function",
        max_context_tokens: int = 128_000,
        accepts_images: bool = True,
        messages_scrubber: MessagesScrubber | None = None,
        name: str = "function",
        price: ModelPrice | None = None,
        chunk_size: int | None = None,
    ) -> None:
        super().__init__(
            model_name=model_name,
            max_context_tokens=max_context_tokens,
            accepts_images=accepts_images,
            messages_scrubber=messages_scrubber,
            name=name,
            price=price,
        )
        self.function = function
        self.calls = 0
        self.chunk_size = chunk_size

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        self.calls += 1
        reply = self.function(list(records))
        completion = (
            reply
            if isinstance(reply, Completion)
            else Completion(text=_reply_text(reply), model=self.model_name)
        )
        self._stream(completion.text, on_delta)
        return completion
