"""A scripted summarizer for the Librarian's tests: a real LLMEndpoint whose replies a
function computes from the request, so a test can fail, stall or misbehave on purpose."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from roboz.llm import LLMEndpoint
from roboz.llm.endpoint import Completion, DeltaCallback
from roboz.llm.records import ProviderRecord
from roboz.shed.tools.consolidation import SECTIONS

Reply = Callable[[str, str], str]


def memory_reply(prompt: str) -> str:
    """A well-formed memory document that keeps the snapshots' lines."""
    facts = [line for line in prompt.splitlines() if line.startswith("fact:")]
    body = {name: "-" for name in SECTIONS}
    body["Standing instructions"] = "\n".join(facts) or "-"
    return "\n\n".join(f"## {name}\n{text}" for name, text in body.items())


def snapshot_reply(prompt: str) -> str:
    """Every line the user wrote as 'fact: ...' in the excerpt, kept verbatim."""
    facts = [line for line in prompt.splitlines() if line.startswith("fact:")]
    return "\n".join(facts) or "nothing of note"


def default_reply(system: str, prompt: str) -> str:
    return memory_reply(prompt) if "memory document" in system else snapshot_reply(prompt)


class ScriptedSummarizer(LLMEndpoint):
    def __init__(self, reply: Reply = default_reply) -> None:
        super().__init__(model_name="summarizer", max_context_tokens=100_000)
        self.reply = reply
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        system = records[0]["content"]
        prompt = records[1]["content"]
        with self._lock:
            self.prompts.append(prompt)
        return Completion(text=self.reply(system, prompt), model=self.model_name)
