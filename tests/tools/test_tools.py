import asyncio

import pytest

from roboz import Skill, factory, tool
from roboz.models import Empty, Int, Message, Stop, Str
from roboz.tools import Tool, ToolDefinitionError, ToolOutputError, stop


@tool
def source(input: Empty, messages: list[Message]) -> Int:
    """Produce a number."""
    return Int(value=2)


def test_docstring_is_the_instruction_and_types_are_recorded() -> None:
    assert source.instruction == "Produce a number."
    assert source.input_type is Empty
    assert source.output_types == (Int,)
    assert not source.is_chained


def test_wrong_arity_fails_at_decoration_naming_the_function() -> None:
    with pytest.raises(ToolDefinitionError, match="lonely"):

        @tool
        def lonely(input: Empty) -> Int:  # type: ignore[type-var]
            """x"""
            return Int(value=1)


def test_input_must_be_a_value_model() -> None:
    with pytest.raises(ToolDefinitionError, match="takes_int.*Empty"):

        @tool
        def takes_int(input: int, messages: list[Message]) -> Int:
            """x"""
            return Int(value=input)


def test_messages_parameter_must_be_a_list_of_messages() -> None:
    with pytest.raises(ToolDefinitionError, match="bad_messages.*list\\[Message\\]"):

        @tool
        def bad_messages(input: Empty, messages: list[str]) -> Int:
            """x"""
            return Int(value=1)


def test_return_must_be_value_models() -> None:
    with pytest.raises(ToolDefinitionError, match="returns_str"):

        @tool
        def returns_str(input: Empty, messages: list[Message]) -> str:
            """x"""
            return "no"

    with pytest.raises(ToolDefinitionError, match="half_typed"):

        @tool
        def half_typed(input: Empty, messages: list[Message]) -> Stop | str:
            """x"""
            return "no"


def test_docstring_is_required() -> None:
    with pytest.raises(ToolDefinitionError, match="undocumented"):

        @tool
        def undocumented(input: Empty, messages: list[Message]) -> Int:
            return Int(value=1)


def test_condition_without_parent_is_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="needs chained_to"):

        @tool(chain_condition=lambda x: True)
        def orphan(input: Empty, messages: list[Message]) -> Int:
            """x"""
            return Int(value=1)


def test_chaining_to_one_or_several_parents_records_names() -> None:
    @tool
    def other(input: Empty, messages: list[Message]) -> Int:
        """Another source."""
        return Int(value=3)

    @tool(chained_to=[source, other], chain_condition=lambda x: x.value > 1)
    def sink(input: Int, messages: list[Message]) -> Stop:
        """Consume."""
        return Stop(value=input.value)

    assert sink.chained_to == ("source", "other")
    assert sink.is_chained
    assert sink.chain_condition is not None and sink.chain_condition(Int(value=2))


def test_chain_method_chains_in_place_with_the_decorators_arguments() -> None:
    @tool
    def plain(input: Int, messages: list[Message]) -> Stop:
        """Stop with the number."""
        return Stop(value=input.value)

    @tool
    def other(input: Empty, messages: list[Message]) -> Int:
        """Another number."""
        return Int(value=3)

    # The result is discarded on purpose: the call alone must chain.
    plain.chain(chained_to=[source, other], chain_condition=lambda x: x.value > 2)
    assert plain.chained_to == ("source", "other")
    assert plain.chain_condition is not None and plain.chain_condition(Int(value=3))
    assert not plain.chain_condition(Int(value=2))

    @tool
    def single(input: Int, messages: list[Message]) -> Stop:
        """Stop."""
        return Stop(value=input.value)

    assert single.chain(chained_to=source) is single
    assert single.chained_to == ("source",) and single.chain_condition is None
    with pytest.raises(ToolDefinitionError, match="needs chained_to"):
        single.renamed("s").chain(chained_to=[])
    # An already chained tool is never re-wired behind another user's back; a copy can be.
    with pytest.raises(ToolDefinitionError, match="already chained to source"):
        single.chain(chained_to=other)
    copy = single.renamed("single").chain(chained_to=other)
    assert copy.chained_to == ("other",) and single.chained_to == ("source",)
    with pytest.raises(TypeError):
        single.chain(source)  # type: ignore[misc]


def test_a_discarded_chain_call_takes_effect_in_an_agent() -> None:
    from roboz import Agent, AgentMode

    @tool
    def begin(input: Empty, messages: list[Message]) -> Int:
        """Begin."""
        return Int(value=7)

    @tool
    def end(input: Int, messages: list[Message]) -> Stop:
        """End."""
        return Stop(value=input.value * 2)

    end.chain(chained_to=begin)
    agent = Agent(name="d", mode=AgentMode.DETERMINISTIC, default_tools=[begin], tools=[end])
    assert agent.invoke()[0].value == 14


def test_factory_binds_its_context_and_keeps_chaining_arguments() -> None:
    @factory(chained_to=source, chain_condition=lambda x: x.value % 2 == 0)
    def scaled(input: Int, messages: list[Message], ctx: int) -> Int:
        """Multiply by the context."""
        return Int(value=input.value * ctx)

    three, ten = scaled(3), scaled(10)
    assert isinstance(three, Tool) and three is not ten
    assert three.run(Int(value=2), []).value == 6  # type: ignore[attr-defined]
    assert ten.run(Int(value=2), []).value == 20  # type: ignore[attr-defined]
    assert three.chained_to == ("source",)
    assert three.instruction == "Multiply by the context."


def test_factory_signature_is_checked_naming_the_function() -> None:
    with pytest.raises(ToolDefinitionError, match="no_ctx"):

        @factory
        def no_ctx(input: Empty, messages: list[Message]) -> Int:
            """x"""
            return Int(value=1)


def test_a_tool_returning_an_undeclared_type_fails_naming_it() -> None:
    @tool
    def liar(input: Empty, messages: list[Message]) -> Int:
        """Claims Int."""
        return Str(value="nope")  # type: ignore[return-value]

    with pytest.raises(ToolOutputError, match="liar.*Str.*Int"):
        liar.run(Empty(), [])


def test_stop_tool_returns_its_value() -> None:
    result = stop.run(Stop(value="done"), [])
    assert isinstance(result, Stop) and result.value == "done"


def test_skill_factory_builds_a_skill_from_a_context() -> None:
    def build(ctx: int) -> list[Tool]:
        @tool(name=f"add_{ctx}")
        def add(input: Int, messages: list[Message]) -> Int:
            """Add the context."""
            return Int(value=input.value + ctx)

        return [add]

    make = Skill.factory(
        name="adder", description="Adds", instructions="Add things.", build_tools=build
    )
    skill = make(5)
    assert isinstance(skill, Skill)
    assert [t.name for t in skill.tools] == ["add_5"]
    assert skill.instructions == "Add things."


def test_skill_prerequisites_come_first_and_cycles_are_impossible() -> None:
    base = Skill(name="base", description="b", instructions="B")
    top = Skill(name="top", description="t", instructions="T", depends_on=base)
    assert [s.name for s in top.with_prerequisites()] == ["base", "top"]
    with pytest.raises(ToolDefinitionError):
        Skill(name="not an identifier", description="", instructions="")
    with pytest.raises(ToolDefinitionError, match="Tool instances"):
        Skill(name="bad", description="", instructions="", tools=["x"])  # type: ignore[list-item]


def test_async_tools_and_factories_are_recognized_and_callable() -> None:
    import asyncio

    @tool
    async def later(input: Empty, messages: list[Message]) -> Int:
        """Later."""
        await asyncio.sleep(0)
        return Int(value=5)

    @factory
    async def scaled(input: Empty, messages: list[Message], ctx: int) -> Int:
        """Scaled."""
        return Int(value=ctx)

    assert later.is_async and scaled(3).is_async and not source.is_async
    assert later(Empty(), []) == Int(value=5)  # runs on a fresh loop when none is running

    async def inside_a_loop() -> None:
        assert await later.arun(Empty(), []) == Int(value=5)
        assert await source.arun(Empty(), []) == Int(value=2)
        with pytest.raises(RuntimeError, match="await tool.arun"):
            later(Empty(), [])

    asyncio.run(inside_a_loop())


def test_a_factory_with_an_async_body_gives_tools_with_both() -> None:
    calls: list[str] = []

    @factory
    def fetch(input: Str, messages: list[Message], ctx: str) -> Str:
        """Fetch a thing."""
        calls.append("sync")
        return Str(value=f"{ctx}:{input.value}")

    @fetch.async_body
    async def afetch(input: Str, messages: list[Message], ctx: str) -> Str:
        """Fetch a thing, on an async client."""
        calls.append("async")
        return Str(value=f"{ctx}:{input.value}")

    bound = fetch("c")
    assert not bound.is_async and bound.afunc is not None
    assert bound.run(Str(value="x"), []) == Str(value="c:x")
    assert asyncio.run(bound.arun(Str(value="y"), [])) == Str(value="c:y")
    assert calls == ["sync", "async"]
    assert asyncio.run(afetch(Str(value="z"), [], "d")) == Str(value="d:z")  # still callable


def test_an_async_body_must_fit_the_sync_one() -> None:
    @factory
    def fetch(input: Str, messages: list[Message], ctx: str) -> Str:
        """Fetch a thing."""
        return input

    with pytest.raises(ToolDefinitionError, match="must take and return what the sync body"):

        @fetch.async_body
        async def other(input: Int, messages: list[Message], ctx: str) -> Str:
            """Other."""
            return Str(value="")

    with pytest.raises(ToolDefinitionError, match="pairs an async def"):
        fetch.async_body(fetch.func)
    with pytest.raises(ToolDefinitionError, match="afunc is the async body"):
        Tool(
            name="t",
            instruction="t",
            input_type=Str,
            output_types=(Str,),
            func=lambda i, m: i,
            afunc=lambda i, m: i,
        )
