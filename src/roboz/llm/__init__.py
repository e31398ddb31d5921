"""LLM endpoints and the calls that use them."""

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
