"""Parsing ``[value, tag]`` pairs: control operators into a sequence of pipelines, and each
command's tokens into allowlisted options and operands."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from roboz.shed.files.spec import CONTROL_OPERATORS, SPECS, CommandSpec
from roboz.shed.files.tokens import Tag, Token


class CommandSyntaxError(ValueError):
    """The tokens do not form a valid command; the message says how to fix it."""


@dataclass
class Call:
    """One command as written: its name and the tokens after it."""

    name: str
    args: list[Token]

    @property
    def spec(self) -> CommandSpec:
        return SPECS[self.name]

    @property
    def text(self) -> str:
        return " ".join(shlex.quote(v) for v in [*self.name.split(), *(a for a, _ in self.args)])


@dataclass
class Step:
    """A pipeline and the operator that joins it to the previous step (None for the first)."""

    operator: str | None
    pipeline: list[Call]


@dataclass
class Parsed:
    """A command's allowlisted options (canonical name -> values) and its operands."""

    options: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    operands: list[Token] = field(default_factory=list[Token])

    def has(self, name: str) -> bool:
        return name in self.options

    def value(self, name: str) -> str | None:
        values = self.options.get(name)
        return values[-1] if values else None


def parse_sequence(tokens: list[Token]) -> list[Step]:
    """Split on control operators: pipelines bind tighter than ``&&``, ``||`` and ``;``."""
    steps: list[Step] = []
    pipeline: list[Call] = []
    current: Call | None = None
    operator: str | None = None
    expect_command = True
    for position, (value, tag) in enumerate(tokens, 1):
        tag = Tag(tag)
        if tag is Tag.CTL:
            if value not in CONTROL_OPERATORS:
                raise CommandSyntaxError(
                    f"token {position}: {value!r} is not a control operator; use &&, ||, ; or | "
                    "(there is no shell: no redirections, substitutions or background jobs; "
                    "write files with tee)"
                )
            if current is None:
                raise CommandSyntaxError(f"token {position}: {value!r} must follow a command")
            pipeline.append(current)
            current = None
            if value == "|":
                expect_command = True
                continue
            steps.append(Step(operator, pipeline))
            pipeline, operator, expect_command = [], value, True
            continue
        if tag is Tag.CMD and current is not None and current.name == "gio" and not current.args:
            if value != "trash":
                raise CommandSyntaxError("gio supports only 'gio trash'")
            current.name = "gio trash"
            continue
        if tag is Tag.CMD:
            if not expect_command:
                raise CommandSyntaxError(
                    f"token {position}: command {value!r} must follow a control operator"
                )
            name = value.strip()
            if name not in SPECS and name != "gio":
                known = ", ".join(SPECS)
                raise CommandSyntaxError(
                    f"token {position}: unknown command {value!r}; available: {known}"
                )
            current = Call(name, [])
            expect_command = False
            continue
        if current is None:
            raise CommandSyntaxError(
                f"token {position}: {value!r} ({tag.value}) must follow a CMD token"
            )
        if current.name == "gio" and not current.args:
            if value != "trash":
                raise CommandSyntaxError("gio supports only 'gio trash'")
            current.name = "gio trash"
            continue
        current.args.append((value, tag))
    if current is not None:
        pipeline.append(current)
    elif operator != ";" or pipeline:
        raise CommandSyntaxError("the sequence must end with a command")
    if pipeline:
        steps.append(Step(operator, pipeline))
    for step in steps:
        for call in step.pipeline:
            if call.name == "gio":
                raise CommandSyntaxError("gio supports only 'gio trash'")
    return steps


def parse_options(call: Call) -> Parsed:
    """Check every option against the command's allowlist; collect operands in order."""
    spec = call.spec
    parsed = Parsed()
    args = call.args
    index = 0
    options_done = False
    while index < len(args):
        value, tag = args[index]
        index += 1
        if tag is not Tag.FLG or options_done:
            if tag is Tag.FLG:
                raise CommandSyntaxError(
                    f"{call.name}: option {value!r} after '--'; operands after '--' are ARG or PTH"
                )
            parsed.operands.append((value, tag))
            continue
        if value == "--":
            options_done = True
            continue
        name, inline = value, None
        if value.startswith("--") and "=" in value:
            name, inline = value.split("=", 1)
        option = spec.by_name.get(name)
        if option is None and not value.startswith("--") and len(value) > 2 and value[0] == "-":
            letters = [f"-{letter}" for letter in value[1:]]
            found = [spec.by_name.get(letter) for letter in letters]
            if all(item is not None and item.value is None for item in found):
                for item in found:
                    assert item is not None
                    parsed.options.setdefault(item.names[0], [])
                continue
        if option is None:
            raise CommandSyntaxError(_not_allowed(spec, value))
        canonical = option.names[0]
        if option.value is None:
            if inline is not None:
                raise CommandSyntaxError(f"{call.name}: option {name} takes no value")
            parsed.options.setdefault(canonical, [])
            continue
        if inline is None:
            if index >= len(args) or args[index][1] not in (Tag.ARG, Tag.PTH):
                raise CommandSyntaxError(
                    f"{call.name}: option {name} needs a value in the next {option.value} token"
                )
            inline, given = args[index][0], args[index][1]
            index += 1
            if option.value == "PTH" and given is not Tag.PTH:
                raise CommandSyntaxError(f"{call.name}: the value of {name} is a path; tag PTH")
        if option.check is not None and not option.check.fullmatch(inline):
            raise CommandSyntaxError(f"{call.name}: invalid value {inline!r} for {name}")
        parsed.options.setdefault(canonical, []).append(inline)
    return parsed


def _not_allowed(spec: CommandSpec, value: str) -> str:
    allowed = ", ".join(name for option in spec.options for name in option.names[:1])
    return f"{spec.name}: option {value!r} is not allowed" + (
        f" (allowed: {allowed})" if allowed else " (this command takes no options)"
    )
