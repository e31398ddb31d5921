import io
import os
import sys

import pytest
from rich.console import Console

from roboz.models import Int, Str
from roboz.runtime import CliUserIO, EventPipe, interact_with_user, use_pipe, use_user_io
from roboz.runtime.events import AgentFailed, AgentFinished, Event, ToolFinished, UserNotified
from roboz.runtime.io import ask_yes_no
from roboz.runtime.sinks import CliSink
from roboz.runtime.usage import LLMCallUsage, RunUsage


def test_pipe_fans_out_and_a_failing_sink_does_not_stop_others() -> None:
    got: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("sink bug")

    pipe = EventPipe([broken, got.append])
    pipe.emit(UserNotified(message="hi"))
    assert got == [UserNotified(message="hi")]
    unsubscribe = pipe.subscribe(got.append)
    unsubscribe()
    assert len(pipe.sinks) == 2


def test_cli_user_io_wraps_input_in_str_and_returns_none_at_eof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("forty two\n"))
    reply = CliUserIO().request_input("Number?")
    assert reply == Str(value="forty two")
    assert CliUserIO().request_input("Again?") is None


def test_cli_user_io_times_out_with_none(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as never_written:
        monkeypatch.setattr(sys, "stdin", never_written)
        assert CliUserIO().request_input("Quick?", timeout=0.05) is None
    os.close(write_end)


class Recorder:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.notes: list[str] = []

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | None:
        return Str(value=self.reply)

    def notify(self, message: str) -> None:
        self.notes.append(message)


def test_interact_with_user_notifies_or_asks_through_the_current_adapter() -> None:
    recorder = Recorder("Yes")
    events: list[Event] = []
    with use_user_io(recorder), use_pipe(EventPipe([events.append])):
        assert interact_with_user("note", with_reply=False) is None
        assert interact_with_user("question?") == Str(value="Yes")
        assert ask_yes_no("allowed?")
    assert recorder.notes == ["note"]
    assert isinstance(events[0], UserNotified)
    with use_user_io(Recorder("nope")):
        assert not ask_yes_no("allowed?")


def test_cli_sink_prints_readable_lines() -> None:
    buffer = io.StringIO()
    sink = CliSink(Console(file=buffer, width=200, color_system=None))
    sink(ToolFinished(agent="a", tool="count", output=Int(value=3), duration_s=0.002))
    sink(ToolFinished(agent="a", tool="prompt_llm", output=Int(value=3)))
    sink(AgentFinished(agent="a", output=Str(value="done"), steps=4, llm_calls=1))
    lines = buffer.getvalue().splitlines()
    assert lines == [
        'a count → {"value": 3} 2.0 ms',
        'a finished after 4 step(s), 1 LLM call(s): {"value": "done"}',
    ]


def test_a_sink_that_unsubscribes_itself_mid_emit_does_not_hide_the_event_from_the_next() -> None:
    from roboz.runtime.events import Event, EventPipe

    pipe = EventPipe()
    seen: list[str] = []

    def once(event: Event) -> None:
        seen.append("once")
        unsubscribe()

    unsubscribe = pipe.subscribe(once)
    pipe.subscribe(lambda event: seen.append("after"))
    pipe.emit(Event())
    pipe.emit(Event())
    assert seen == ["once", "after", "after"]


def test_cli_sink_prints_the_usage_totals_at_the_end() -> None:
    buffer = io.StringIO()
    sink = CliSink(Console(file=buffer, width=200, color_system=None))
    usage = RunUsage(
        calls=(
            LLMCallUsage("main", "big", 1000, 100, cost=0.003),
            LLMCallUsage("helper", "small", 50, 5),
            LLMCallUsage("main", "big", 1200, 80, cost=0.004, rejected=True),
        )
    )
    sink(AgentFinished(agent="a", output=Str(value="done"), steps=3, llm_calls=2, usage=usage))
    sink(AgentFailed(agent="b", error="boom", usage=RunUsage(calls=usage.calls[1:2])))
    assert buffer.getvalue().splitlines() == [
        'a finished after 3 step(s), 2 LLM call(s): {"value": "done"}',
        "a usage: 3 LLM call(s), 2250 input + 185 output tokens, cost 0.007000 "
        "(+1 call(s) without a price)",
        "a   main (big): 2 LLM call(s), 2200 input + 180 output tokens, cost 0.007000",
        "a   helper (small): 1 LLM call(s), 50 input + 5 output tokens",
        "b failed: boom",
        "b usage: 1 LLM call(s), 50 input + 5 output tokens",
    ]
