"""Small building blocks shared by the agent tests."""

from __future__ import annotations

from roboz.llm import MockLLMEndpoint, ProviderRecord


def system_text(records: list[ProviderRecord]) -> str:
    assert records[0]["role"] == "system"
    return records[0]["content"]


def contents(records: list[ProviderRecord]) -> list[str]:
    return [record["content"] for record in records[1:]]


def last_request(endpoint: MockLLMEndpoint) -> list[ProviderRecord]:
    return endpoint.requests[-1]
