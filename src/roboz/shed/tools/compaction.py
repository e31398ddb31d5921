"""Conversation compaction: a default tool that runs before ``prompt_llm``.

When the context the next LLM call would carry reaches ``threshold`` of the agent endpoint's
``max_context_tokens``, the older part of the conversation is summarized by a summarizer
endpoint (the agent's own unless configured) and one compacted-context message is appended.
The agent's view (``roboz.agent.view``) then shows the head (system, start-up messages and the
task, everything before the first assistant message), the latest compacted message, and what
followed it. Every original message stays in the conversation (and in a persisted thread):
compaction, like truncation, changes what the LLM sees, never what is stored. Because the
compacted message is an ordinary appended message, a resumed run sees the same view.

The check is O(1) per LLM call: the endpoint's reported input and output tokens of the latest
reply plus a running estimate (characters / 4) of the messages appended since, or the running
estimate alone when the endpoint reports nothing. Images never reach the summarizer: they
become their URL, or a numbered marker when embedded. The summarizer's prompts live in their
own message list, never in the agent's conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from roboz.agent.context import current_run
from roboz.agent.view import COMPACTED_KIND
from roboz.llm import EndpointLike
from roboz.models import Empty, Message, Role
from roboz.runtime.events import Event, emit
from roboz.shed.tools._bounded import call_bounded
from roboz.tools import Tool

DEFAULT_NAME = "compact_context"

SUMMARIZER_PROMPT = (
    "You compact the working memory of an AI agent. Summarize the conversation excerpt you "
    "are given so the agent can continue its task from the summary alone: keep goals, "
    "decisions, facts learned, file names, identifiers, numbers, open questions and what was "
    "about to happen next; drop chatter and repeated tool output. Image markers such as "
    "[image 1] or [image: URL] stand for images; keep the ones that still matter. Reply "
    "with the summary text only."
)


@dataclass(frozen=True)
class ContextCompacted(Event):
    """Older messages were summarized into one compacted-context message."""

    summarized: int = 0
    """How many messages the summary stands in for."""
    estimated_tokens: int = 0
    """The context estimate that triggered compaction."""
    summary_tokens: int = 0
    attempts: int = 1


@dataclass(frozen=True)
class CompactionSkipped(Event):
    """Compaction was due but the run continues uncompacted; ``reason`` says why."""

    reason: str = ""
    estimated_tokens: int = 0


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def head_end(messages: Sequence[Message]) -> int:
    """Index of the first assistant message: everything before it is always kept."""
    for index, message in enumerate(messages):
        if message.role is Role.ASSISTANT:
            return index
    return len(messages)


def transcript(messages: Sequence[Message], first_number: int = 1) -> str:
    """The messages as plain text for a summarizer; images become URL or numbered markers."""
    lines: list[str] = []
    number = first_number
    for message in messages:
        who = message.role.value + (f" ({message.caller})" if message.caller else "")
        markers: list[str] = []
        for image in message.images:
            if image.is_embedded:
                markers.append(f"[image {number}]")
                number += 1
            else:
                markers.append(f"[image: {image.url}]")
        text = message.content + ("\n" + " ".join(markers) if markers else "")
        lines.append(f"--- {who}:\n{text}")
    return "\n".join(lines)


class _Estimate:
    """Running context estimate of one conversation list, advanced by new messages only."""

    def __init__(self) -> None:
        self.conversation_id: int | None = None
        self.counted = 0
        self.head_chars = 0
        self.head_end: int | None = None
        self.compacted: int | None = None
        self.chars_since_compacted = 0
        self.reported: int | None = None  # tokens the endpoint reported for the latest reply
        self.chars_since_reply = 0

    def advance(self, messages: list[Message]) -> int:
        if id(messages) != self.conversation_id or len(messages) < self.counted:
            self.__init__()  # type: ignore[misc]  # a new run (or a foreign list): start over
            self.conversation_id = id(messages)
        for index in range(self.counted, len(messages)):
            message = messages[index]
            chars = len(message.content)
            if self.head_end is None and message.role is Role.ASSISTANT:
                self.head_end = index
            if self.head_end is None:
                self.head_chars += chars
            if message.message_kind == COMPACTED_KIND:
                self.compacted, self.chars_since_compacted = index, 0
                self.reported, self.chars_since_reply = None, 0
            self.chars_since_compacted += chars if self.head_end is not None else 0
            if message.role is Role.ASSISTANT and message.token_input is not None:
                self.reported = message.token_input + (message.token_output or 0)
                self.chars_since_reply = 0
            else:
                self.chars_since_reply += chars
        self.counted = len(messages)
        if self.reported is not None:
            return self.reported + (self.chars_since_reply + 3) // 4
        return (self.head_chars + self.chars_since_compacted + 3) // 4


class Compactor:
    """Settings and state of one compaction tool (build it with :meth:`tool`).

    ``endpoint`` summarizes (default: the running agent's endpoint); ``max_context_tokens``
    defaults to the agent endpoint's. Compaction starts at ``threshold`` of it; a summary
    must fit ``summary_max_tokens`` (default a tenth of the context) and is asked again with
    feedback up to ``max_attempts`` times in all; each summarizer call may take
    ``timeout_s``.
    """

    def __init__(
        self,
        *,
        endpoint: EndpointLike | None = None,
        max_context_tokens: int | None = None,
        threshold: float = 0.8,
        summary_max_tokens: int | None = None,
        max_attempts: int = 3,
        timeout_s: float = 120.0,
        name: str = DEFAULT_NAME,
    ) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"compaction threshold must be in (0, 1], got {threshold}")
        if max_attempts < 1:
            raise ValueError("compaction needs max_attempts >= 1")
        self.endpoint = endpoint
        self.max_context_tokens = max_context_tokens
        self.threshold = threshold
        self.summary_max_tokens = summary_max_tokens
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.name = name
        self._estimate = _Estimate()

    def tool(self) -> Tool:
        return Tool(
            name=self.name,
            instruction="Compact the conversation when the LLM's context is nearly full.",
            input_type=Empty,
            output_types=(Empty,),
            func=self._run,
            records_own_output=True,
        )

    # -- the tool ------------------------------------------------------------------------------

    def _limits(self) -> tuple[EndpointLike | None, int | None, str | None]:
        run = current_run()
        agent_endpoint = run.endpoint if run is not None else None
        context = self.max_context_tokens or getattr(agent_endpoint, "max_context_tokens", None)
        return self.endpoint or agent_endpoint, context, run.agent if run else None

    def _run(self, input: Empty, messages: list[Message]) -> Empty:
        estimated = self._estimate.advance(messages)
        summarizer, context, agent = self._limits()
        if context is None or estimated < self.threshold * context:
            return Empty()
        if summarizer is None:
            emit(
                CompactionSkipped(
                    agent=agent, reason="no summarizer endpoint", estimated_tokens=estimated
                )
            )
            return Empty()
        start = self._estimate.compacted
        if start is None:
            start = (
                self._estimate.head_end if self._estimate.head_end is not None else len(messages)
            )
        excerpt = messages[start:]
        if len(excerpt) < 2:
            emit(
                CompactionSkipped(
                    agent=agent,
                    reason="nothing old enough to summarize",
                    estimated_tokens=estimated,
                )
            )
            return Empty()
        budget = self.summary_max_tokens or max(64, context // 10)
        try:
            summary, attempts = self._summarize(summarizer, excerpt, budget)
        except Exception as error:  # the run goes on uncompacted; the event says why
            emit(
                CompactionSkipped(
                    agent=agent,
                    reason=f"summarizer failed: {type(error).__name__}: {error}",
                    estimated_tokens=estimated,
                )
            )
            return Empty()
        if summary is None:
            emit(
                CompactionSkipped(
                    agent=agent,
                    reason=f"summary still over {budget} tokens after {attempts} attempt(s)",
                    estimated_tokens=estimated,
                )
            )
            return Empty()
        covered = len(excerpt)
        messages.append(
            Message(
                role=Role.USER,
                content=f"[Compacted context: a summary of {covered} earlier messages]\n{summary}",
                caller=self.name,
                message_kind=COMPACTED_KIND,
            )
        )
        emit(
            ContextCompacted(
                agent=agent,
                summarized=covered,
                estimated_tokens=estimated,
                summary_tokens=estimate_tokens(summary),
                attempts=attempts,
            )
        )
        return Empty()

    def _summarize(
        self, summarizer: EndpointLike, excerpt: Sequence[Message], budget: int
    ) -> tuple[str | None, int]:
        """The summary (None when none fit the budget) and how many attempts it took."""
        request = [
            Message(role=Role.SYSTEM, content=SUMMARIZER_PROMPT),
            Message(
                role=Role.USER,
                content=f"Summarize in at most {budget} tokens:\n\n{transcript(excerpt)}",
            ),
        ]
        for attempt in range(1, self.max_attempts + 1):
            text = call_bounded(
                summarizer, request, self.timeout_s, thread_name="roboz-compaction"
            ).strip()
            size = estimate_tokens(text)
            if text and size <= budget:
                return text, attempt
            feedback = (
                "The summary is empty." if not text else f"That summary is about {size} tokens."
            )
            request += [
                Message(role=Role.ASSISTANT, content=text),
                Message(
                    role=Role.USER,
                    content=f"{feedback} It must fit in {budget} tokens. Write it again, "
                    "shorter, keeping what the agent needs to continue.",
                ),
            ]
        return None, self.max_attempts


def compaction_tool(**settings: object) -> Tool:
    """A compaction default tool; ``settings`` are :class:`Compactor`'s keywords."""
    return Compactor(**settings).tool()  # type: ignore[arg-type]
