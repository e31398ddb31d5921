"""MCP tools of a real server (the demo server over stdio and HTTP) as RoboZ tools."""

# No `from __future__ import annotations`: the chain test annotates native tools with model
# classes generated at run time, which must be evaluated where they are defined.

import os
import time
from pathlib import Path

import pytest

from roboz.agent import Agent, AgentMode
from roboz.deployment import DeployableAgent, SkillLabel
from roboz.llm import MockLLMEndpoint
from roboz.mcp import MCPConnectionError, MCPServer, MCPToolError, MCPTools, succeeded
from roboz.models import Empty, Message, Role, Stop, Str, StrImage
from roboz.tools import Tool, stop, tool
from tests.mcp.conftest import Recorder, stdio_demo


class Answers:
    """A UserIO that answers approvals from a script and keeps the prompts."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | None:
        self.prompts.append(prompt)
        return Str(value=self.replies.pop(0)) if self.replies else None

    def notify(self, message: str) -> None:
        pass


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {item.name: item for item in tools}


def tool_messages(conversation: list[Message]) -> dict[str, str]:
    return {m.caller or "": m.content for m in conversation if m.role is Role.TOOL}


def test_outputs_are_typed(demo: MCPServer) -> None:
    tools = by_name(demo.tools())
    echo, add, weather, picture = tools["echo"], tools["add"], tools["weather"], tools["picture"]
    assert "Return the text unchanged." in echo.instruction
    assert echo.run(echo.input_type(text="hi"), []) == Str(value="hi")
    assert add.run(add.input_type(a=2, b=3), []).model_dump(exclude={"truncation"}) == {"result": 5}
    forecast = weather.run(weather.input_type.model_validate({"city": "Oslo", "unit": "f"}), [])
    assert type(forecast).__name__ == "WeatherOutput"
    assert forecast.model_dump(exclude={"truncation"}) == {
        "city": "Oslo",
        "temperature": 70.7,
        "unit": "f",
    }
    image = picture.run(picture.input_type(), [])
    assert isinstance(image, StrImage) and image.images[0].url.startswith("data:image/png")
    search = tools["search"]
    found = search.run(
        search.input_type.model_validate({"query": "q", "filter": {"depth": 2, "tags": ["x"]}}), []
    )
    assert found == Str(value="q: depth 2, tags x, limit None")


def test_a_tool_error_names_server_and_tool(demo: MCPServer) -> None:
    fail = by_name(demo.tools())["fail"]
    result = fail.run(fail.input_type(why="because"), [])
    assert isinstance(result, MCPToolError)
    assert "'fail'" in result.value and "'demo'" in result.value
    assert "failing on purpose: because" in result.value


def test_include_exclude_prefix_and_unknown_names(demo: MCPServer) -> None:
    assert [t.name for t in demo.tools(include=["echo", "sh*"])] == ["echo", "shout"]
    assert "delete_all" not in [t.name for t in demo.tools(exclude=["delete_*"])]
    assert [t.name for t in demo.tools(include=["echo"], prefix="demo_")] == ["demo_echo"]
    with pytest.raises(ValueError, match="no tool matching 'nope'.*echo"):
        demo.tools(include=["nope"])
    with pytest.raises(ValueError, match="verdict must be allow, deny or ask"):
        demo.tools(rules={"echo": "maybe"})


def test_mcp_output_chains_into_a_native_tool_and_back_with_one_llm_call(
    demo: MCPServer, recorder: Recorder
) -> None:
    tools = by_name(demo.tools(include=["echo", "shout"]))
    echo = tools["echo"]
    ShoutInput = tools["shout"].input_type

    @tool(chained_to=echo, chain_condition=succeeded)
    def count_words(input: Str, messages: list[Message]) -> ShoutInput:
        """Turn the echoed text into a shout request, once per word."""
        return ShoutInput(text=input.value, times=len(input.value.split()))

    shout = tools["shout"].chain(chained_to=count_words, chain_condition=succeeded)

    @tool(chained_to=shout, chain_condition=succeeded)
    def finish(input: Str, messages: list[Message]) -> Stop:
        """End with the shout."""
        return Stop(value=input.value)

    endpoint = MockLLMEndpoint([{"action": "echo", "rationale": "go", "text": "hi there"}])
    agent = Agent(
        "chainer",
        agent_endpoint=endpoint,
        tools=[echo, count_words, shout, finish],
        mode=AgentMode.AUTONOMOUS,
    )
    result, conversation = agent.invoke()
    assert result.value == "HI THERE HI THERE"
    assert endpoint.calls == 1
    assert recorder.calls() == ["echo", "shout"]
    assert [m.caller for m in conversation if m.role is Role.TOOL] == [
        "echo",
        "count_words",
        "shout",
        "finish",
    ]


def test_a_denied_tool_never_reaches_the_server(demo: MCPServer, recorder: Recorder) -> None:
    tools = demo.tools(include=["echo", "delete_all"], rules={"delete_*": "deny"})
    endpoint = MockLLMEndpoint(
        [
            {"action": "delete_all", "rationale": "clean up"},
            {"action": "echo", "rationale": "then", "text": "ok"},
            {"action": "stop", "rationale": "done", "value": "finished"},
        ]
    )
    agent = Agent("guarded", agent_endpoint=endpoint, tools=[*tools, stop])
    result, conversation = agent.invoke()
    assert result.value == "finished"
    assert recorder.calls() == ["echo"]
    refusal = tool_messages(conversation)["delete_all"]
    assert "refused: denied by rule 'delete_*'; the server was not called" in refusal


@pytest.mark.parametrize(("reply", "reached"), [("y", ["shout"]), ("n", [])])
def test_ask_goes_to_the_user(
    demo: MCPServer, recorder: Recorder, reply: str, reached: list[str]
) -> None:
    user = Answers(reply)
    tools = demo.tools(include=["shout"], rules={"*": "deny", "shout": "ask"})
    endpoint = MockLLMEndpoint(
        [
            {"action": "shout", "rationale": "loud", "text": "hey"},
            {"action": "stop", "rationale": "done", "value": ""},
        ]
    )
    agent = Agent("asker", agent_endpoint=endpoint, tools=[*tools, stop], user_io=user)
    _, conversation = agent.invoke()
    assert recorder.calls() == reached
    assert "'shout'" in user.prompts[0] and '"text": "hey"' in user.prompts[0]
    answer = tool_messages(conversation)["shout"]
    assert ("HEY" in answer) is (reply == "y")
    assert ("the user did not approve" in answer) is (reply == "n")


def test_a_server_killed_mid_call_is_a_tool_error_and_the_run_goes_on(
    demo: MCPServer, recorder: Recorder
) -> None:
    tools = demo.tools(include=["die", "echo"])
    endpoint = MockLLMEndpoint(
        [
            {"action": "die", "rationale": "oops"},
            {"action": "echo", "rationale": "retry", "text": "back"},
            {"action": "stop", "rationale": "done", "value": "survived"},
        ]
    )
    agent = Agent("survivor", agent_endpoint=endpoint, tools=[*tools, stop])
    first_pid = demo.pid
    result, conversation = agent.invoke()
    assert result.value == "survived"
    messages = tool_messages(conversation)
    assert "MCP tool 'die' on server 'demo' failed" in messages["die"]
    assert "went away" in messages["die"]
    assert "back" in messages["echo"]
    assert demo.reconnects == 1 and demo.pid != first_pid
    assert recorder.calls() == ["die", "echo"]


def test_reconnects_are_bounded(tmp_path: Path) -> None:
    server = stdio_demo(tmp_path / "calls.txt", max_reconnects=1)
    try:
        die = by_name(server.tools(include=["die"]))["die"]
        die.run(die.input_type(), [])
        die.run(die.input_type(), [])  # the one reconnect
        third = die.run(die.input_type(), [])
        assert isinstance(third, MCPToolError)
        assert "1 reconnect(s) were already used" in third.value
    finally:
        server.close()


def test_a_timeout_is_a_tool_error(tmp_path: Path) -> None:
    server = stdio_demo(tmp_path / "calls.txt", timeout=0.5)
    try:
        slow = by_name(server.tools(include=["slow"]))["slow"]
        started = time.monotonic()
        result = slow.run(slow.input_type(seconds=5), [])
        assert isinstance(result, MCPToolError) and "timed out" in result.value
        assert time.monotonic() - started < 4
    finally:
        server.close()


def test_a_server_that_cannot_start_is_an_error_naming_it(tmp_path: Path) -> None:
    broken = MCPServer.stdio(str(tmp_path / "missing-server"), name="ghost")
    try:
        with pytest.raises(MCPConnectionError, match="cannot connect to MCP server 'ghost'"):
            broken.list_tools()
    finally:
        broken.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_close_ends_the_server_and_its_process_group(demo: MCPServer) -> None:
    spawn = by_name(demo.tools(include=["spawn_child"]))["spawn_child"]
    child = int(spawn.run(spawn.input_type(), []).value)
    server_pid = demo.pid
    assert server_pid is not None and _alive(child) and _alive(server_pid)
    assert os.getpgid(child) == server_pid  # the server leads its own group
    demo.close()
    deadline = time.monotonic() + 5
    while (_alive(child) or _alive(server_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child) and not _alive(server_pid)
    assert demo.pid is None


def test_streamable_http(http_demo: str, recorder: Recorder) -> None:
    with MCPServer.http(http_demo, headers={"X-Token": "sesame"}, name="web") as server:
        tools = by_name(server.tools())
        header = tools["header"]
        assert header.run(header.input_type(name="x-token"), []) == Str(value="sesame")
        echo = tools["echo"]
        assert echo.run(echo.input_type(text="over http"), []) == Str(value="over http")
        fail = tools["fail"]
        result = fail.run(fail.input_type(why="x"), [])
        assert isinstance(result, MCPToolError) and "'web'" in result.value
    assert recorder.calls() == ["header", "echo", "fail"]


def test_mcp_tools_capability_and_skill(demo: MCPServer, recorder: Recorder) -> None:
    endpoint = MockLLMEndpoint(
        [
            {"action": "demo_tools", "rationale": "load"},
            {"action": "echo", "rationale": "use", "text": "from a skill"},
            {"action": "stop", "rationale": "done", "value": "ok"},
        ]
    )
    definition = DeployableAgent(name="skilled", agent_endpoint=endpoint)
    definition.add_capabilities(
        MCPTools(demo, include=["echo"], label=SkillLabel("demo_tools")),
        MCPTools(demo, include=["shout"], rules={"shout": "deny"}),
    )
    agent, _ = definition.build()
    assert [t.name for t in agent.tools] == ["shout"]
    assert [s.name for s in agent.skills] == ["demo_tools"]
    agent = agent.replace(tools=[*agent.tools, stop])
    result, conversation = agent.invoke()
    assert result.value == "ok"
    assert recorder.calls() == ["echo"]
    assert "from a skill" in tool_messages(conversation)["echo"]


def test_input_models_are_empty_subclasses(demo: MCPServer) -> None:
    for item in demo.tools():
        assert issubclass(item.input_type, Empty)


def test_tools_work_from_inside_a_running_event_loop(demo: MCPServer) -> None:
    import asyncio

    echo = by_name(demo.tools(include=["echo"]))["echo"]

    async def async_run() -> object:
        # What an async agent run does with a synchronous tool: call it on its own loop's
        # thread or hand it to a worker thread. Both reach the server's private loop.
        inline = echo.run(echo.input_type(text="inline"), [])
        threaded = await asyncio.to_thread(echo.run, echo.input_type(text="threaded"), [])
        return inline, threaded

    assert asyncio.run(async_run()) == (Str(value="inline"), Str(value="threaded"))


def test_async_callers_await_without_blocking_their_loop(demo: MCPServer) -> None:
    import asyncio

    async def main() -> list[str]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        running = asyncio.create_task(ticker())
        results = await asyncio.gather(
            demo.acall_tool("slow", {"seconds": 0.3}), demo.acall_tool("echo", {"text": "x"})
        )
        running.cancel()
        assert ticks >= 10  # the caller's loop kept running while the calls were out
        return [block.text for result in results for block in result.content]

    assert asyncio.run(main()) == ["slept 0.3", "x"]


def test_closed_servers_leave_no_thread_behind(tmp_path: Path) -> None:
    import threading

    before = {t.ident for t in threading.enumerate()}
    with stdio_demo(tmp_path / "calls.txt") as server:
        server.list_tools()
        assert any(t.name == "mcp-demo" for t in threading.enumerate())
    # On 3.11 asyncio reaps a child in a thread of its own ("waitpid-N"), which may still be
    # on its way out when close() returns: a thread left behind is one still alive later.
    left = [t for t in threading.enumerate() if t.ident not in before]
    for thread in left:
        thread.join(10)
    assert not [t for t in left if t.is_alive()], left
