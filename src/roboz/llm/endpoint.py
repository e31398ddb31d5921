"""The endpoint contract: anything that turns provider records into a completion."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from roboz.llm.records import MessagesScrubber, ProviderRecord, default_messages_scrubber
from roboz.runtime.offload import in_worker_thread
from roboz.runtime.usage import ModelPrice

DeltaCallback = Callable[[str], None]


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Completion:
    text: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str = ""


@runtime_checkable
class EndpointLike(Protocol):
    """What tools and agents need from an LLM endpoint.

    ``name`` labels the endpoint in events and stored messages; ``messages_scrubber`` maps
    messages to provider records (None: ``default_messages_scrubber``).
    """

    model_name: str
    max_context_tokens: int
    accepts_images: bool

    @property
    def name(self) -> str: ...

    @property
    def messages_scrubber(self) -> MessagesScrubber | None: ...

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion: ...


@runtime_checkable
class AsyncEndpointLike(Protocol):
    """An endpoint that can be awaited; ``ainvoke`` uses ``acomplete`` when there is one."""

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion: ...


async def complete_in_thread(
    endpoint: EndpointLike,
    records: Sequence[ProviderRecord],
    *,
    on_delta: DeltaCallback | None = None,
    cancel: threading.Event | None = None,
) -> Completion:
    """A blocking ``complete`` awaited from async code: asyncio cancellation sets ``cancel``
    (which the endpoint watches) and waits for the call to give up."""
    cancel = cancel if cancel is not None else threading.Event()
    return await in_worker_thread(
        lambda: endpoint.complete(records, on_delta=on_delta, cancel=cancel),
        on_cancel=cancel.set,
    )


class LLMEndpoint(ABC):
    """Base class of chat endpoints. Endpoints are instances: swap one for another freely.

    Subclasses implement ``complete``. They receive records already mapped by
    ``messages_scrubber`` (role, content, optional images) and must not keep a process-wide
    slot across calls. ``price`` (optional) is what the model costs, so runs can report the
    cost of the calls they make (``RunUsage.cost``).
    """

    def __init__(
        self,
        *,
        model_name: str,
        max_context_tokens: int,
        accepts_images: bool = False,
        messages_scrubber: MessagesScrubber | None = None,
        name: str | None = None,
        price: ModelPrice | None = None,
    ) -> None:
        self.model_name = model_name
        self.price = price
        self.max_context_tokens = max_context_tokens
        self.accepts_images = accepts_images
        self.messages_scrubber: MessagesScrubber = messages_scrubber or default_messages_scrubber
        self.name = name or model_name

    @abstractmethod
    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        """Send records to the model and return its reply."""

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        """Awaitable ``complete``; this default runs it on a worker thread. Endpoints with a
        native async client override it."""
        return await complete_in_thread(self, records, on_delta=on_delta, cancel=cancel)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_name={self.model_name!r})"
