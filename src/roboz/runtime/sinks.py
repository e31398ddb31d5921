"""Event sinks. CliSink prints a readable live transcript of a run."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    AgentStarted,
    Event,
    LLMProseDelta,
    LLMReplied,
    LLMReplyRejected,
    SkillLoaded,
    ToolFinished,
    ToolStarted,
)
from roboz.runtime.usage import RunUsage


def _short(value: Any, limit: int = 160) -> str:
    if hasattr(value, "model_dump"):
        data = value.model_dump(exclude_none=True, exclude={"truncation"})
        text = json.dumps(data, default=str, ensure_ascii=False)
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CliSink:
    """Prints one line per step: tools started and finished, LLM replies, the result.

    The LLM's rationale and text arguments are shown live, as prose, while they stream.
    """

    wants_deltas = True

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.verbose = verbose
        self._prose_field: str | None = None  # the field being written on the open line

    @classmethod
    def default(cls) -> CliSink:
        return cls()

    def __call__(self, event: Event) -> None:
        if isinstance(event, LLMProseDelta):
            self._write_prose(event)
            return
        line = self.render(event)
        if line is not None:
            self._end_prose()
            self.console.print(line)

    def _write_prose(self, event: LLMProseDelta) -> None:
        if event.field != self._prose_field:
            self._end_prose()
            who = f"[dim]{escape(event.agent or '')}[/dim] " if event.agent else ""
            action = f"{escape(event.action)} " if event.action else ""
            self.console.print(f"{who}[magenta]{action}{escape(event.field)}:[/magenta] ", end="")
            self._prose_field = event.field
        self.console.print(event.text, end="", markup=False, highlight=False)

    def _end_prose(self) -> None:
        if self._prose_field is not None:
            self.console.print()
            self._prose_field = None

    def render(self, event: Event) -> str | None:
        who = f"[dim]{escape(event.agent or '')}[/dim] " if event.agent else ""
        match event:
            case AgentStarted(mode=mode):
                return f"{who}[bold]started[/bold] ({mode})"
            case ToolStarted(tool=tool, trigger=trigger) if self.verbose:
                return f"{who}→ {escape(tool)} [dim]({trigger})[/dim]"
            case ToolFinished(tool="prompt_llm"):
                return None  # the LLM reply line already shows the chosen action
            case ToolFinished(tool=tool, output=output, duration_s=duration):
                return (
                    f"{who}[cyan]{escape(tool)}[/cyan] → {escape(_short(output))} "
                    f"[dim]{duration * 1000:.1f} ms[/dim]"
                )
            case LLMReplied(text=text, input_tokens=tokens_in, output_tokens=tokens_out):
                return (
                    f"{who}[magenta]llm[/magenta] {escape(_short(text))} "
                    f"[dim]({tokens_in}+{tokens_out} tokens)[/dim]"
                )
            case LLMReplyRejected(reason=reason):
                return f"{who}[yellow]llm reply rejected[/yellow]: {escape(reason)}"
            case SkillLoaded(skill=skill):
                return f"{who}[green]skill loaded[/green] {escape(skill)}"
            case AgentFinished(output=output, steps=steps, llm_calls=calls, usage=usage):
                return (
                    f"{who}[bold]finished[/bold] after {steps} step(s), {calls} LLM call(s): "
                    f"{escape(_short(output))}" + _usage_lines(who, usage)
                )
            case AgentFailed(error=error, usage=usage):
                return f"{who}[bold red]failed[/bold red]: {escape(error)}" + _usage_lines(
                    who, usage
                )
            case _:
                return None  # other events have no line of their own


def _usage_lines(who: str, usage: RunUsage) -> str:
    """The run's totals, and one line per (endpoint, model) when there were several."""
    if not usage.calls:
        return ""
    lines = [f"\n{who}[dim]usage: {escape(usage.summary())}[/dim]"]
    models = usage.by_model()
    if len(models) > 1:
        for model in models:
            lines.append(
                f"\n{who}[dim]  {escape(model.endpoint)} ({escape(model.model)}): "
                f"{escape(model.summary())}[/dim]"
            )
    return "".join(lines)
