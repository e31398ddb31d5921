"""The system prompt an agent shows its LLM, and parsing the LLM's action replies."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
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


_RUNTIME = set(RUNTIME_FIELDS)  # never mutated: built once, not per call
_dumps = json.JSONEncoder(ensure_ascii=False).encode
_quoted: Callable[[str], str] = json.encoder.encode_basestring  # what _dumps writes for a str


def action_json(invoke: Invoke) -> str:
    """The assistant message text for an accepted action: supplied arguments only."""
    given = invoke.input.model_fields_set
    if not given or given <= _RUNTIME:  # no arguments: nothing to dump
        return f'{{"action": {_quoted(invoke.action)}, "rationale": {_quoted(invoke.rationale)}}}'
    arguments = invoke.input.model_dump(mode="json", exclude_unset=True, exclude=_RUNTIME)
    return _dumps({"action": invoke.action, "rationale": invoke.rationale, **arguments})


def parse_action(
    text: str,
    *,
    actions: Mapping[str, Tool],
    skills: Mapping[str, Skill],
    passive: Mapping[str, Tool],
) -> Invoke:
    """Turn a reply into an Invoke, or raise ReplyRejected saying exactly what is wrong."""
    body = text.strip()
    fenced = _FENCE.match(body) if body.startswith("```") else None
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
    tool = actions.get(name)
    if tool is not None:
        arguments: Empty = tool.input_type.model_validate(data)
        return _invoke(name, rationale, arguments)
    if name in skills:
        if data:
            raise ReplyRejected(f"loading the skill {name!r} takes no arguments")
        return Invoke(action=name, rationale=rationale)
    choices = ", ".join(sorted([*actions, *skills])) or "(none)"
    if name in passive:
        parents = ", ".join(repr(p) for p in passive[name].chained_to)
        raise ReplyRejected(
            f"{name!r} runs automatically after {parents} and cannot be chosen; "
            f"choose one of: {choices}"
        )
    raise ReplyRejected(f"unknown action {name!r}; choose one of: {choices}")


_new_invoke = Invoke.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_INVOKE_SET = frozenset({"action", "rationale", "input"})


def _invoke(action: str, rationale: str, arguments: Empty) -> Invoke:
    """``Invoke(action=..., rationale=..., input=...)`` of values already validated (the two
    strings checked above, the arguments by their model), without validating them again:
    one per LLM step."""
    invoke = _new_invoke(Invoke)
    fields = {"truncation": None, "action": action, "rationale": rationale, "input": arguments}
    _set_dict(invoke, "__dict__", fields)
    _set_fields_set(invoke, set(_INVOKE_SET))
    _set_extra(invoke, None)
    _set_private(invoke, None)
    return invoke


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
