"""The system prompt an agent shows its LLM, and parsing the LLM's action replies."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, TypeGuard

from pydantic import BaseModel

from roboz.llm import ReplyRejected
from roboz.models import Empty, Invoke
from roboz.models.values import RUNTIME_FIELDS
from roboz.tools import Skill, Tool

TECHNICAL_PROMPT = """\
## How to act
Each turn, reply with exactly one JSON object and nothing else:
{"action": "<action name>", "rationale": "<one short sentence: why>", <the action's arguments as \
top-level fields>}
Use only the actions listed below, with the arguments their schema allows. Some actions are \
followed automatically by further steps; their results appear in the conversation."""

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@lru_cache(maxsize=1024)
def argument_schema(input_type: type[BaseModel]) -> str:
    """Compact JSON schema of an action's arguments (cached: schemas are costly to build)."""
    schema = input_type.model_json_schema()
    properties = schema.get("properties", {})
    if not properties:
        return "no arguments"
    compact: dict[str, Any] = {"properties": properties}
    if schema.get("required"):
        compact["required"] = schema["required"]
    if schema.get("$defs"):
        compact["$defs"] = schema["$defs"]
    return json.dumps(compact, separators=(",", ":"))


def render_system_prompt(
    system_prompt: str,
    *,
    automatic_tool_prompt: bool,
    actions: Iterable[Tool],
    offered_skills: Iterable[Skill],
    loaded_skills: Iterable[Skill],
) -> str:
    parts = [system_prompt.strip()] if system_prompt.strip() else []
    if automatic_tool_prompt:
        parts.append(TECHNICAL_PROMPT)
        lines = ["## Actions"]
        for item in actions:
            arguments: type[BaseModel] = item.input_type
            lines.append(
                f"### {item.name}\n{item.instruction}\nArguments: {argument_schema(arguments)}"
            )
        for skill in offered_skills:
            lines.append(
                f"### {skill.name}\nLoad the skill {skill.name!r}: {skill.description} "
                "(adds its instructions and actions)\nArguments: no arguments"
            )
        parts.append("\n\n".join(lines))
    loaded = list(loaded_skills)
    if loaded:
        parts.append(
            "## Loaded skills\n\n"
            + "\n\n".join(f"### {skill.name}\n{skill.instructions}" for skill in loaded)
        )
    return "\n\n".join(parts)


def action_json(invoke: Invoke) -> str:
    """The assistant message text for an accepted action: supplied arguments only."""
    arguments = invoke.input.model_dump(
        mode="json", exclude_unset=True, exclude=set(RUNTIME_FIELDS)
    )
    return json.dumps(
        {"action": invoke.action, "rationale": invoke.rationale, **arguments}, ensure_ascii=False
    )


def parse_action(
    text: str,
    *,
    actions: Mapping[str, Tool],
    skills: Mapping[str, Skill],
    passive: Mapping[str, Tool],
) -> Invoke:
    """Turn a reply into an Invoke, or raise ReplyRejected saying exactly what is wrong."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as error:
        raise ReplyRejected(f"the reply is not a JSON object ({error.msg})") from None
    if not _is_json_object(data):
        raise ReplyRejected("the reply must be one JSON object, not " + type(data).__name__)
    name = data.pop("action", None)
    if not isinstance(name, str) or not name:
        raise ReplyRejected('the reply needs an "action" field naming one of the actions')
    rationale = data.pop("rationale", "")
    if not isinstance(rationale, str):
        raise ReplyRejected('"rationale" must be a string')
    _check_encodable(data, rationale)
    choices = ", ".join(sorted([*actions, *skills])) or "(none)"
    if name in actions:
        tool = actions[name]
        arguments: Empty = tool.input_type.model_validate(data)
        return Invoke(action=name, rationale=rationale, input=arguments)
    if name in skills:
        if data:
            raise ReplyRejected(f"loading the skill {name!r} takes no arguments")
        return Invoke(action=name, rationale=rationale)
    if name in passive:
        parents = ", ".join(repr(p) for p in passive[name].chained_to)
        raise ReplyRejected(
            f"{name!r} runs automatically after {parents} and cannot be chosen; "
            f"choose one of: {choices}"
        )
    raise ReplyRejected(f"unknown action {name!r}; choose one of: {choices}")


def _is_json_object(value: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


def _is_json_array(value: object) -> TypeGuard[list[Any]]:
    return isinstance(value, list)


def _check_encodable(arguments: dict[str, Any], rationale: str) -> None:
    """Reject text that cannot be encoded as UTF-8 (lone surrogates, e.g. from a ``\\ud800``
    escape), naming the argument, before any tool sees it: such a string would otherwise
    break the run later, when the conversation is serialized, and no tool should get it."""
    problem = _unencodable("rationale", rationale)
    for key in arguments:
        problem = problem or _unencodable(f"{key!r} (a name)", key)
    pending: list[tuple[str, Any]] = list(arguments.items())
    while problem is None and pending:
        where, value = pending.pop()
        if isinstance(value, str):
            problem = _unencodable(where, value)
        elif _is_json_object(value):
            for key, item in value.items():
                problem = problem or _unencodable(f"{where} (a key)", str(key))
                pending.append((f"{where}.{key}", item))
        elif _is_json_array(value):
            pending.extend((f"{where}[{index}]", item) for index, item in enumerate(value))
    if problem is not None:
        raise ReplyRejected(problem)


def _unencodable(where: str, text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return (
            f"argument {where!r} contains text that cannot be encoded as UTF-8 "
            f"({error.reason} at character {error.start}); send valid Unicode text only"
        )
    return None
