"""LLM endpoints and the calls that use them."""

from typing import TYPE_CHECKING

from roboz._lazy import lazy_exports

if TYPE_CHECKING:
    from roboz.llm.completion import (
        ReplyRejected,
        call_llm_api,
        complete_validated,
        get_completion,
        to_records,
    )
    from roboz.llm.endpoint import (
        AsyncEndpointLike,
        Completion,
        EndpointLike,
        LLMEndpoint,
        TokenUsage,
    )
    from roboz.llm.endpoints import FunctionEndpoint, MockLLMEndpoint
    from roboz.llm.errors import LLMError, LLMReplyError, MockScriptExhaustedError
    from roboz.llm.records import MessagesScrubber, ProviderRecord, default_messages_scrubber
    from roboz.runtime.usage import LLMCallUsage, ModelPrice, RunUsage

__all__ = [
    "AsyncEndpointLike",
    "Completion",
    "EndpointLike",
    "FunctionEndpoint",
    "LLMCallUsage",
    "LLMEndpoint",
    "LLMError",
    "LLMReplyError",
    "MessagesScrubber",
    "MockLLMEndpoint",
    "MockScriptExhaustedError",
    "ModelPrice",
    "ProviderRecord",
    "ReplyRejected",
    "RunUsage",
    "TokenUsage",
    "call_llm_api",
    "complete_validated",
    "default_messages_scrubber",
    "get_completion",
    "to_records",
]

# Loaded on first use (roboz._lazy): the errors are imported by the CLI's light commands.
__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncEndpointLike": "roboz.llm.endpoint",
        "Completion": "roboz.llm.endpoint",
        "EndpointLike": "roboz.llm.endpoint",
        "FunctionEndpoint": "roboz.llm.endpoints",
        "LLMCallUsage": "roboz.runtime.usage",
        "LLMEndpoint": "roboz.llm.endpoint",
        "LLMError": "roboz.llm.errors",
        "LLMReplyError": "roboz.llm.errors",
        "MessagesScrubber": "roboz.llm.records",
        "MockLLMEndpoint": "roboz.llm.endpoints",
        "MockScriptExhaustedError": "roboz.llm.errors",
        "ModelPrice": "roboz.runtime.usage",
        "ProviderRecord": "roboz.llm.records",
        "ReplyRejected": "roboz.llm.completion",
        "RunUsage": "roboz.runtime.usage",
        "TokenUsage": "roboz.llm.endpoint",
        "call_llm_api": "roboz.llm.completion",
        "complete_validated": "roboz.llm.completion",
        "default_messages_scrubber": "roboz.llm.records",
        "get_completion": "roboz.llm.completion",
        "to_records": "roboz.llm.completion",
    },
)
