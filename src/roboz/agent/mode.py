"""How an agent decides its next step."""

from enum import StrEnum


class AgentMode(StrEnum):
    DETERMINISTIC = "deterministic"
    """No LLM: default tools run in order and chains branch deterministically."""
    STEERABLE = "steerable"
    """prompt_llm is the last default; the LLM may also ask the user for input."""
    AUTONOMOUS = "autonomous"
    """prompt_llm is the last default; nobody is asked for input."""
