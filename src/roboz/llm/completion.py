"""Calling endpoints: raw text, usage, and validated replies with a bounded repair loop."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ValidationError

from roboz.llm.endpoint import Completion, DeltaCallback, EndpointLike, TokenUsage
from roboz.llm.errors import LLMReplyError
from roboz.llm.records import (
    PROVIDER_ROLE,
    ProviderRecord,
    check_image_roles,
    default_messages_scrubber,
)
from roboz.models import Message, Role
from roboz.runtime.usage import LLMCallUsage, ModelPrice, current_usage_recorder

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_REPAIRS = 2
REPAIR_KIND = "repair"
"""``message_kind`` of a correction the framework sent after an unusable reply."""
REJECTED_KIND = "rejected_reply"
"""``message_kind`` of the unusable reply a repair answers (kept for the LLM to see)."""


class ReplyRejected(ValueError):
    """Raised by a reply parser to send the reason back to the LLM."""


def to_records(endpoint: EndpointLike, messages: Sequence[Message]) -> list[ProviderRecord]:
    scrubber = endpoint.messages_scrubber or default_messages_scrubber
    records = scrubber(messages)
    if not endpoint.accepts_images:
        records = [_without_images(record) for record in records]
    check_image_roles(records)
    return records


def to_record(endpoint: EndpointLike, message: Message) -> ProviderRecord:
    """``to_records(endpoint, [message])[0]`` for an endpoint with the default scrubber, built
    directly (the agent's view renders each message once, on every LLM step)."""
    content = message.content
    if message.role is Role.TOOL and message.caller:
        content = f"[{message.caller} result] {content}"
    images = message.images
    record: ProviderRecord = {
        "role": PROVIDER_ROLE[message.role],
        "content": content,
        "images": list(images),
    }
    if not images:
        return record if endpoint.accepts_images else _without_images(record)
    if not endpoint.accepts_images:
        return _without_images(record)
    check_image_roles([record])
    return record


def _without_images(record: ProviderRecord) -> ProviderRecord:
    images = record.get("images") or []
    if not images:
        return {"role": record["role"], "content": record["content"]}
    # Say so rather than drop silently: the model should know something was attached.
    note = f"[{len(images)} image(s) omitted: this endpoint does not accept images]"
    content = f"{record['content']}\n{note}" if record["content"] else note
    return {"role": record["role"], "content": content}


def record_usage(endpoint: EndpointLike, completion: Completion, *, rejected: bool = False) -> None:
    """Count one call in the current run's usage (a no-op outside a run)."""
    recorder = current_usage_recorder()
    if recorder is None:
        return
    usage = completion.usage
    price = getattr(endpoint, "price", None)  # optional: EndpointLike does not require it
    recorder.add(
        LLMCallUsage(
            endpoint=endpoint.name,
            model=completion.model or endpoint.model_name,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=(
                price.cost(usage.input_tokens, usage.output_tokens)
                if isinstance(price, ModelPrice)
                else None
            ),
            rejected=rejected,
        )
    )


def call_llm_api(
    endpoint: EndpointLike,
    messages: Sequence[Message],
    *,
    on_delta: DeltaCallback | None = None,
    cancel: threading.Event | None = None,
) -> tuple[str, TokenUsage]:
    """Send messages to an endpoint; return the reply text and its token usage."""
    completion = endpoint.complete(to_records(endpoint, messages), on_delta=on_delta, cancel=cancel)
    record_usage(endpoint, completion)
    return completion.text, completion.usage


class RepairBudget:
    """Bounded corrections of one LLM decision: each rejected reply (or tool ``Retry``) costs
    one; the one after the last allowed ends the exchange with LLMReplyError.

    ``reject`` returns the two messages to add to the conversation (the rejected reply and
    the correction); once the budget is spent they are on the error's ``exchange``.
    """

    def __init__(self, max_repairs: int = DEFAULT_MAX_REPAIRS) -> None:
        self.max_repairs = max_repairs
        self.spent = 0
        self.total = 0

    def reset(self) -> None:
        self.spent = 0

    def reject(
        self,
        reply: str | None,
        reason: str,
        *,
        model: str | None = None,
        what: str = "reply",
        caller: str | None = None,
    ) -> list[Message]:
        """``reply=None``: the reply is already in the conversation (a tool's ``Retry``)."""
        reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
        exchange = [
            # A TOOL message, never USER: USER is the human (the thread shows it as theirs and
            # a turn starts at it); the thread model stores this as the framework's (ROBOTO).
            Message(
                role=Role.TOOL,
                content=f"Your previous {what} could not be used: {reason}. Reply again, "
                "following the instructions exactly.",
                caller=caller,
                message_kind=REPAIR_KIND,
            )
        ]
        if reply is not None:
            rejected = Message(
                role=Role.ASSISTANT,
                # Kept for the LLM to see, so it must survive serialization even when the
                # reply itself held text that cannot be encoded.
                content=reply.encode("utf-8", "replace").decode("utf-8"),
                message_kind=REJECTED_KIND,
                model=model or None,
            )
            exchange.insert(0, rejected)
        if self.spent >= self.max_repairs:
            raise LLMReplyError(
                f"the LLM reply was still unusable after {self.max_repairs} correction(s): "
                f"{reason}",
                attempts=self.spent + 1,
                last_reply=reply or "",
                reason=reason,
                exchange=exchange[:1] if reply is not None else [],
            )
        self.spent += 1
        self.total += 1
        return exchange


def reason_of(error: Exception) -> str:
    """What to tell the LLM about a reply its parser refused."""
    if isinstance(error, ValidationError):
        problems = [
            f"{'.'.join(str(part) for part in item['loc']) or 'reply'}: {item['msg']}"
            for item in error.errors()
        ]
        return "; ".join(problems)
    return str(error)


REPLY_ERRORS = (ReplyRejected, ValidationError)
"""What a reply parser raises about the reply: sent back to the LLM as a repair. Any other
error (a ValueError from a bug in the parser) is not the reply's fault and propagates."""


def complete_validated(
    endpoint: EndpointLike,
    messages: Sequence[Message],
    parse: Callable[[str], T],
    *,
    max_repairs: int = DEFAULT_MAX_REPAIRS,
    on_delta: DeltaCallback | None = None,
    cancel: threading.Event | None = None,
) -> tuple[T, Completion, list[Message]]:
    """Ask until ``parse`` accepts the reply, telling the LLM what was wrong each time.

    Returns the parsed value, the accepted completion, and the repair exchange (rejected
    replies and the corrections sent back) so callers can keep it in their conversation.
    Raises LLMReplyError after ``max_repairs`` corrections; its ``exchange`` holds them.
    """
    conversation = list(messages)
    repairs: list[Message] = []
    budget = RepairBudget(max_repairs)
    while True:
        completion = endpoint.complete(
            to_records(endpoint, conversation), on_delta=on_delta, cancel=cancel
        )
        try:
            value = parse(completion.text)
        except REPLY_ERRORS as error:
            record_usage(endpoint, completion, rejected=True)
            try:
                exchange = budget.reject(completion.text, reason_of(error), model=completion.model)
            except LLMReplyError as failure:
                failure.exchange[:0] = repairs
                raise failure from error
            repairs += exchange
            conversation += exchange
            continue
        record_usage(endpoint, completion)
        return value, completion, repairs


@overload
def get_completion(
    endpoint: EndpointLike,
    messages: Sequence[Message],
    response_model: None = None,
    *,
    max_repairs: int = ...,
    on_delta: DeltaCallback | None = ...,
    cancel: threading.Event | None = ...,
) -> str: ...


@overload
def get_completion(
    endpoint: EndpointLike,
    messages: Sequence[Message],
    response_model: type[M],
    *,
    max_repairs: int = ...,
    on_delta: DeltaCallback | None = ...,
    cancel: threading.Event | None = ...,
) -> M: ...


def get_completion(
    endpoint: EndpointLike,
    messages: Sequence[Message],
    response_model: type[BaseModel] | None = None,
    *,
    max_repairs: int = DEFAULT_MAX_REPAIRS,
    on_delta: DeltaCallback | None = None,
    cancel: threading.Event | None = None,
) -> Any:
    """The reply text, or a ``response_model`` validated from the reply's JSON.

    A reply that does not validate goes back to the LLM with the reason, at most
    ``max_repairs`` times, then LLMReplyError is raised.
    """
    if response_model is None:
        text, _usage = call_llm_api(endpoint, messages, on_delta=on_delta, cancel=cancel)
        return text
    value, _completion, _repairs = complete_validated(
        endpoint,
        messages,
        response_model.model_validate_json,
        max_repairs=max_repairs,
        on_delta=on_delta,
        cancel=cancel,
    )
    return value
