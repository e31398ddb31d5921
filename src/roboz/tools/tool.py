"""Tools: typed callables whose docstring is the instruction the LLM sees.

``@tool`` turns ``f(input: X, messages: list[Message]) -> Y`` into a Tool. ``@factory`` turns
``f(input: X, messages: list[Message], ctx: C) -> Y`` into a Factory; calling the factory with a
context returns a Tool with that context bound in its closure. Both take the same chaining
arguments: ``chained_to`` names the upstream tool(s) whose output becomes this tool's input,
and ``chain_condition`` decides, from that output, whether this link fires.

Outputs are typed values. ``raw=True`` (on ``@tool`` or ``@factory``) is the one explicit
opt-in to raw text: the function returns ``str``, the tool returns it as RawText, and the LLM
sees the text as is.
"""

from __future__ import annotations

import asyncio
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, Union, cast, overload

from typing_extensions import TypeVar

from roboz.models import Empty, Message, RawText

# Defaults of Any keep a bare ``Tool`` / ``Factory`` meaning "any tool", as before they were
# generic. ``In`` is invariant (a tool both takes and, through chains, is fed its input);
# ``Out`` is covariant, so a parent whose output is a subclass of the child's input fits.
In = TypeVar("In", bound=Empty, default=Any)
Out = TypeVar("Out", bound=Empty, default=Any, covariant=True)
C = TypeVar("C", default=Any)
_In = TypeVar("_In", bound=Empty)
_Out = TypeVar("_Out", bound=Empty)
_C = TypeVar("_C")
_P = TypeVar("_P", bound=Empty)
ChainCondition = Callable[[Any], bool]
Parent = Union["Tool[Any, _P]", "Factory[Any, Any, _P]", str]
Parents = Union[
    "Tool[Any, Any]",
    "Factory[Any, Any, Any]",
    str,
    Sequence["Tool[Any, Any] | Factory[Any, Any, Any] | str"],
    None,
]


class ToolDefinitionError(TypeError):
    """A tool, factory or chain is declared wrongly; the message names the function."""


class ToolOutputError(TypeError):
    """A tool returned something other than what its annotation promises."""


RAW_HINT = "; to hand the LLM raw text, opt in with @tool(raw=True) and return str"


class Retry(Exception):
    """Raised by a tool to send the LLM a correction instead of ending the run.

    The message goes back to the LLM (``Retry("dates are YYYY-MM-DD")``) and the LLM chooses
    again. It counts as a repair of that decision: after the agent's ``max_repairs`` the run
    ends with AgentReplyError. Outside an LLM-driven agent there is no one to correct, so it
    ends the run like any other tool error.
    """


@dataclass(frozen=True, eq=False)
class Tool(Generic[In, Out]):
    """A runnable step of an agent. Identity matters: every Tool is a distinct instance.

    ``Tool[In, Out]`` takes ``In`` and returns ``Out`` (a union when it returns several value
    types); ``@tool`` infers both from the decorated function.
    """

    name: str
    instruction: str
    input_type: type[In]
    output_types: tuple[type[Empty], ...]
    func: Callable[[In, list[Message]], Any] = field(repr=False)
    chained_to: tuple[str, ...] = ()
    chain_condition: ChainCondition | None = field(default=None, repr=False)
    records_own_output: bool = field(default=False, repr=False)
    """Set by tools (like prompt_llm) that append their own conversation message."""
    is_async: bool = field(default=False, repr=False)
    """``func`` is an ``async def``: agents await it on their loop (a private one in invoke)."""
    afunc: Callable[[In, list[Message]], Awaitable[Out]] | None = field(default=None, repr=False)
    """An async body beside a sync ``func``, doing the same on async clients: async runs
    (``ainvoke``, ``arun``) await it, sync runs call ``func``; neither pays for the other."""
    pure: bool = False
    """The tool has no effect outside its output and computes the same output from the same
    input and conversation (a parser, a formatter, arithmetic). A durable run
    (``roboz.durable``) re-runs a pure tool inline when it replays a turn instead of recording
    it as a step, saving a database round trip per call; anything that reads the clock, the
    network, files or randomness is not pure. Ordinary runs ignore the flag."""

    def __post_init__(self) -> None:
        if inspect.iscoroutinefunction(self.func) and not self.is_async:
            object.__setattr__(self, "is_async", True)
        if self.afunc is not None and (
            self.is_async or not inspect.iscoroutinefunction(self.afunc)
        ):
            raise ToolDefinitionError(
                f"tool {self.name!r}: afunc is the async body beside a sync func; give an "
                "async def as afunc and a plain def as func"
            )

    @property
    def is_chained(self) -> bool:
        """Chained tools are passive: only their parents' outputs trigger them."""
        return bool(self.chained_to)

    def checked(self, output: Any) -> Empty:
        """``output`` if it is what the annotation promises, else ToolOutputError."""
        if not isinstance(output, self.output_types):
            expected = " | ".join(t.__name__ for t in self.output_types)
            hint = RAW_HINT if isinstance(output, str) else ""
            raise ToolOutputError(
                f"tool {self.name!r} returned {type(output).__name__}, "
                f"but its annotation promises {expected}{hint}"
            )
        return output

    def run(self, input: In, messages: list[Message]) -> Out:
        """Call the tool directly (an async tool runs to completion on a fresh loop)."""
        if self.is_async:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return cast(Out, self.checked(asyncio.run(self.func(input, messages))))
            raise RuntimeError(
                f"tool {self.name!r} is async and a loop is running here: await tool.arun(...)"
            )
        return cast(Out, self.checked(self.func(input, messages)))

    async def arun(self, input: In, messages: list[Message]) -> Out:
        """Call the tool directly from async code (a sync tool is called as is)."""
        if self.afunc is not None:
            return cast(Out, self.checked(await self.afunc(input, messages)))
        output = self.func(input, messages)
        return cast(Out, self.checked(await output if self.is_async else output))

    __call__ = run

    def chain(
        self,
        *,
        chained_to: Parent[In] | Sequence[Parent[In]],
        chain_condition: Callable[[In], bool] | None = None,
    ) -> Tool[In, Out]:
        """Chain this tool in place, with the decorator's own arguments, and return it.

        In place, so that a call whose result is discarded still chains. A tool that is
        already chained is refused rather than silently re-wired (it may be in use by another
        agent or skill); chain a copy instead: ``tool.renamed(tool.name).chain(...)``.
        """
        parents = _normalize_parents(chained_to, self.name)
        if not parents:
            raise ToolDefinitionError(f"{self.name}.chain() needs chained_to (a parent tool)")
        if self.chained_to:
            raise ToolDefinitionError(
                f"tool {self.name!r} is already chained to {', '.join(self.chained_to)}; chain "
                f"a copy instead: {self.name}.renamed({self.name!r}).chain(...)"
            )
        object.__setattr__(self, "chained_to", parents)
        object.__setattr__(self, "chain_condition", chain_condition)
        return self

    def renamed(self, name: str) -> Tool[In, Out]:
        """An unchained copy of this tool under ``name`` (which may be its own name)."""
        return replace(self, name=name, chained_to=(), chain_condition=None)


class Factory(Generic[C, In, Out]):
    """Builds Tools that carry a context (typically an endpoint) in their closure.

    ``Factory[C, In, Out]`` accepts a context ``C`` and builds ``Tool[In, Out]``.
    """

    def __init__(
        self,
        func: Callable[[In, list[Message], C], Any],
        *,
        name: str,
        instruction: str,
        input_type: type[In],
        output_types: tuple[type[Empty], ...],
        chained_to: tuple[str, ...],
        chain_condition: ChainCondition | None,
        raw: bool = False,
    ) -> None:
        self.func = func
        self.raw = raw
        """``func`` already returns RawText for its text (``@factory(raw=True)``)."""
        self.name = name
        self.instruction = instruction
        self.input_type = input_type
        self.output_types = output_types
        self.chained_to = chained_to
        self.chain_condition = chain_condition
        self.afunc: Callable[[In, list[Message], C], Awaitable[Any]] | None = None

    def async_body(
        self, afunc: Callable[[In, list[Message], C], Coroutine[Any, Any, _Out]]
    ) -> Callable[[In, list[Message], C], Coroutine[Any, Any, _Out]]:
        """Decorate the async twin of this (sync) factory's body: the same signature, on async
        clients. Tools built from the factory then run it in async runs and the sync body in
        sync ones. Returns ``afunc`` unchanged, so it stays callable on its own."""
        label = getattr(afunc, "__qualname__", repr(afunc))
        if inspect.iscoroutinefunction(self.func) or not inspect.iscoroutinefunction(afunc):
            raise ToolDefinitionError(
                f"{label}: async_body pairs an async def with a factory whose body is a plain def"
            )
        input_type, output_types = _signature_types(afunc, 3, raw=self.raw)
        if (input_type, output_types) != (self.input_type, self.output_types):
            raise ToolDefinitionError(
                f"{label}: the async body of {self.name!r} must take and return what the sync "
                f"body does ({self.input_type.__name__} -> "
                f"{' | '.join(t.__name__ for t in self.output_types)})"
            )
        self.afunc = _raw_body(afunc, self.name) if self.raw else afunc
        return afunc

    def __call__(self, ctx: C) -> Tool[In, Out]:
        func = self.func

        # An async factory body stays a coroutine function, so the run awaits it on its loop.
        async def bound_async(input: In, messages: list[Message]) -> Any:
            return await func(input, messages, ctx)

        def bound_sync(input: In, messages: list[Message]) -> Any:
            return func(input, messages, ctx)

        bound: Callable[[In, list[Message]], Any] = (
            bound_async if inspect.iscoroutinefunction(func) else bound_sync
        )
        abound: Callable[[In, list[Message]], Awaitable[Any]] | None = None
        afunc = self.afunc
        if afunc is not None:

            async def bound_twin(input: In, messages: list[Message]) -> Any:
                return await afunc(input, messages, ctx)

            abound = bound_twin

        return Tool(
            name=self.name,
            instruction=self.instruction,
            input_type=self.input_type,
            output_types=self.output_types,
            func=bound,
            chained_to=self.chained_to,
            chain_condition=self.chain_condition,
            afunc=abound,
        )

    def __repr__(self) -> str:
        return f"Factory(name={self.name!r})"


def _parent_names(
    parents: Sequence[Tool[Any, Any] | Factory[Any, Any, Any] | str], child: str
) -> tuple[str, ...]:
    names: list[str] = []
    for parent in parents:
        if isinstance(parent, str):
            names.append(parent)
        elif isinstance(parent, Tool | Factory):
            names.append(parent.name)
        else:
            raise ToolDefinitionError(
                f"tool {child!r}: chained_to must name tools or factories, got {parent!r}"
            )
    return tuple(names)


def _normalize_parents(chained_to: Parents, child: str) -> tuple[str, ...]:
    if chained_to is None:
        return ()
    if isinstance(chained_to, Tool | Factory | str):
        return _parent_names([chained_to], child)
    return _parent_names(list(chained_to), child)


def _signature_types(
    func: Callable[..., Any], expected_params: int, *, raw: bool = False
) -> tuple[type[Empty], tuple[type[Empty], ...]]:
    """Check the tool signature; return its input type and output types (RawText for a raw
    tool, whose function is annotated ``-> str``)."""
    label = getattr(func, "__qualname__", repr(func))
    params = list(inspect.signature(func).parameters.values())
    kinds = {inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD}
    if len(params) != expected_params or any(p.kind not in kinds for p in params):
        shape = "(input, messages)" if expected_params == 2 else "(input, messages, ctx)"
        raise ToolDefinitionError(
            f"{label}: a {'tool' if expected_params == 2 else 'factory'} takes exactly "
            f"{shape}, got ({', '.join(p.name for p in params)})"
        )
    try:
        hints = typing.get_type_hints(func)
    except Exception as error:
        raise ToolDefinitionError(f"{label}: cannot resolve annotations: {error}") from None
    input_type = hints.get(params[0].name)
    if not (isinstance(input_type, type) and issubclass(input_type, Empty)):
        raise ToolDefinitionError(
            f"{label}: the input parameter {params[0].name!r} must be annotated with Empty "
            f"or a subclass of it, got {input_type!r}"
        )
    messages_type = hints.get(params[1].name)
    if typing.get_origin(messages_type) not in (list, Sequence) or typing.get_args(
        messages_type
    ) != (Message,):
        raise ToolDefinitionError(
            f"{label}: the second parameter {params[1].name!r} must be annotated "
            f"list[Message], got {messages_type!r}"
        )
    if "return" not in hints:
        raise ToolDefinitionError(
            f"{label}: annotate the return type ({'str' if raw else 'a value model'})"
        )
    if raw:
        if hints["return"] is not str:
            raise ToolDefinitionError(
                f"{label}: a raw tool (raw=True) returns text: annotate it -> str, got "
                f"{hints['return']!r}"
            )
        return input_type, (RawText,)
    return input_type, _output_types(hints["return"], label)


def _raw_body(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``func`` (a tool's or a factory's body) returning RawText for the str it returns,
    awaited when it is async."""

    def as_raw(text: object) -> RawText:
        if not isinstance(text, str):
            raise ToolOutputError(
                f"tool {name!r} is raw (raw=True), so it returns str, but it returned "
                f"{type(text).__name__}"
            )
        return RawText(value=text)

    if inspect.iscoroutinefunction(func):

        async def raw_async(*args: Any) -> RawText:
            return as_raw(await func(*args))

        return raw_async

    def raw_sync(*args: Any) -> RawText:
        return as_raw(func(*args))

    return raw_sync


def _output_types(annotation: Any, label: str) -> tuple[type[Empty], ...]:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members: tuple[Any, ...] = typing.get_args(annotation)
    else:
        members = (annotation,)
    for member in members:
        if not (isinstance(member, type) and issubclass(member, Empty)):
            hint = " (for raw text, use @tool(raw=True) with -> str)" if member is str else ""
            raise ToolDefinitionError(
                f"{label}: the return annotation must be Empty, a subclass, or a union of "
                f"them; {member!r} is not{hint}"
            )
    return tuple(members)


def _instruction(func: Callable[..., Any]) -> str:
    doc = inspect.getdoc(func)
    if not doc:
        raise ToolDefinitionError(
            f"{func.__qualname__}: a tool's docstring is its instruction; write one"
        )
    return doc


ToolFunc = Callable[[Any, list[Message]], Any]
FactoryFunc = Callable[[Any, list[Message], Any], Any]


class ToolDecorator(Protocol):
    """What ``@tool(...)`` returns: a decorator keeping the function's input and output."""

    @overload
    def __call__(
        self, func: Callable[[_In, list[Message]], Coroutine[Any, Any, _Out]], /
    ) -> Tool[_In, _Out]: ...

    @overload
    def __call__(self, func: Callable[[_In, list[Message]], _Out], /) -> Tool[_In, _Out]: ...


class ChainedToolDecorator(Protocol[_P]):
    """``@tool(chained_to=parent)``: the function must accept the parent's output ``_P``;
    the tool is typed by what its chain feeds it, ``Tool[_P, Out]``."""

    @overload
    def __call__(
        self, func: Callable[[_P, list[Message]], Coroutine[Any, Any, _Out]], /
    ) -> Tool[_P, _Out]: ...

    @overload
    def __call__(self, func: Callable[[_P, list[Message]], _Out], /) -> Tool[_P, _Out]: ...


class RawToolDecorator(Protocol):
    """What ``@tool(raw=True)`` returns: the function returns ``str``, the tool RawText."""

    @overload
    def __call__(
        self, func: Callable[[_In, list[Message]], Coroutine[Any, Any, str]], /
    ) -> Tool[_In, RawText]: ...

    @overload
    def __call__(self, func: Callable[[_In, list[Message]], str], /) -> Tool[_In, RawText]: ...


class ChainedRawToolDecorator(Protocol[_P]):
    """``@tool(raw=True, chained_to=parent)``: takes the parent's output, returns ``str``."""

    @overload
    def __call__(
        self, func: Callable[[_P, list[Message]], Coroutine[Any, Any, str]], /
    ) -> Tool[_P, RawText]: ...

    @overload
    def __call__(self, func: Callable[[_P, list[Message]], str], /) -> Tool[_P, RawText]: ...


class FactoryDecorator(Protocol):
    """What ``@factory(...)`` returns: a decorator keeping context, input and output."""

    @overload
    def __call__(
        self, func: Callable[[_In, list[Message], _C], Coroutine[Any, Any, _Out]], /
    ) -> Factory[_C, _In, _Out]: ...

    @overload
    def __call__(
        self, func: Callable[[_In, list[Message], _C], _Out], /
    ) -> Factory[_C, _In, _Out]: ...


class RawFactoryDecorator(Protocol):
    """What ``@factory(raw=True)`` returns: the body returns ``str``, built tools RawText."""

    @overload
    def __call__(
        self, func: Callable[[_In, list[Message], _C], Coroutine[Any, Any, str]], /
    ) -> Factory[_C, _In, RawText]: ...

    @overload
    def __call__(
        self, func: Callable[[_In, list[Message], _C], str], /
    ) -> Factory[_C, _In, RawText]: ...


class ChainedRawFactoryDecorator(Protocol[_P]):
    """``@factory(raw=True, chained_to=parent)``: takes the parent's output, returns ``str``."""

    @overload
    def __call__(
        self, func: Callable[[_P, list[Message], _C], Coroutine[Any, Any, str]], /
    ) -> Factory[_C, _P, RawText]: ...

    @overload
    def __call__(
        self, func: Callable[[_P, list[Message], _C], str], /
    ) -> Factory[_C, _P, RawText]: ...


class ChainedFactoryDecorator(Protocol[_P]):
    """``@factory(chained_to=parent)``: the function must accept the parent's output."""

    @overload
    def __call__(
        self, func: Callable[[_P, list[Message], _C], Coroutine[Any, Any, _Out]], /
    ) -> Factory[_C, _P, _Out]: ...

    @overload
    def __call__(
        self, func: Callable[[_P, list[Message], _C], _Out], /
    ) -> Factory[_C, _P, _Out]: ...


@overload
def tool(func: Callable[[_In, list[Message]], Coroutine[Any, Any, _Out]], /) -> Tool[_In, _Out]: ...


@overload
def tool(func: Callable[[_In, list[Message]], _Out], /) -> Tool[_In, _Out]: ...


@overload
def tool(
    *,
    chained_to: str | Sequence[str] | None = None,
    chain_condition: ChainCondition | None = None,
    name: str | None = None,
    pure: bool = False,
    raw: Literal[False] = False,
) -> ToolDecorator: ...


@overload
def tool(
    *,
    chained_to: Parent[_P] | Sequence[Parent[_P]],
    chain_condition: Callable[[_P], bool] | None = None,
    name: str | None = None,
    pure: bool = False,
    raw: Literal[False] = False,
) -> ChainedToolDecorator[_P]: ...


@overload
def tool(
    *,
    raw: Literal[True],
    chained_to: str | Sequence[str] | None = None,
    chain_condition: ChainCondition | None = None,
    name: str | None = None,
    pure: bool = False,
) -> RawToolDecorator: ...


@overload
def tool(
    *,
    raw: Literal[True],
    chained_to: Parent[_P] | Sequence[Parent[_P]],
    chain_condition: Callable[[_P], bool] | None = None,
    name: str | None = None,
    pure: bool = False,
) -> ChainedRawToolDecorator[_P]: ...


def tool(
    func: ToolFunc | None = None,
    /,
    *,
    chained_to: Parents = None,
    chain_condition: ChainCondition | None = None,
    name: str | None = None,
    pure: bool = False,
    raw: bool = False,
) -> (
    Tool[Any, Any]
    | ToolDecorator
    | ChainedToolDecorator[Any]
    | RawToolDecorator
    | ChainedRawToolDecorator[Any]
):
    """Make a Tool of ``f(input, messages) -> output``; its docstring is the instruction.

    ``pure=True`` declares that the tool has no outside effect and is deterministic (see
    ``Tool.pure``): durable runs re-run it inline on replay instead of recording a step.

    ``raw=True`` is the explicit opt-in to raw text: ``f`` is annotated ``-> str`` and
    returns text, which the tool returns as RawText and the LLM sees as is (not as the JSON
    of a value). Without it a tool returning ``str`` is refused.
    """

    def decorate(func: ToolFunc) -> Tool[Any, Any]:
        input_type, output_types = _signature_types(func, 2, raw=raw)
        tool_name = name or func.__name__
        parents = _normalize_parents(chained_to, tool_name)
        if chain_condition is not None and not parents:
            raise ToolDefinitionError(f"{tool_name}: chain_condition needs chained_to")
        return Tool(
            name=tool_name,
            instruction=_instruction(func),
            input_type=input_type,
            output_types=output_types,
            func=_raw_body(func, tool_name) if raw else func,
            chained_to=parents,
            chain_condition=chain_condition,
            pure=pure,
        )

    return decorate(func) if func is not None else cast(ToolDecorator, decorate)


@overload
def factory(
    func: Callable[[_In, list[Message], _C], Coroutine[Any, Any, _Out]], /
) -> Factory[_C, _In, _Out]: ...


@overload
def factory(func: Callable[[_In, list[Message], _C], _Out], /) -> Factory[_C, _In, _Out]: ...


@overload
def factory(
    *,
    chained_to: str | Sequence[str] | None = None,
    chain_condition: ChainCondition | None = None,
    name: str | None = None,
    raw: Literal[False] = False,
) -> FactoryDecorator: ...


@overload
def factory(
    *,
    chained_to: Parent[_P] | Sequence[Parent[_P]],
    chain_condition: Callable[[_P], bool] | None = None,
    name: str | None = None,
    raw: Literal[False] = False,
) -> ChainedFactoryDecorator[_P]: ...


@overload
def factory(
    *,
    raw: Literal[True],
    chained_to: str | Sequence[str] | None = None,
    chain_condition: ChainCondition | None = None,
    name: str | None = None,
) -> RawFactoryDecorator: ...


@overload
def factory(
    *,
    raw: Literal[True],
    chained_to: Parent[_P] | Sequence[Parent[_P]],
    chain_condition: Callable[[_P], bool] | None = None,
    name: str | None = None,
) -> ChainedRawFactoryDecorator[_P]: ...


def factory(
    func: FactoryFunc | None = None,
    /,
    *,
    chained_to: Parents = None,
    chain_condition: ChainCondition | None = None,
    name: str | None = None,
    raw: bool = False,
) -> (
    Factory[Any, Any, Any]
    | FactoryDecorator
    | ChainedFactoryDecorator[Any]
    | RawFactoryDecorator
    | ChainedRawFactoryDecorator[Any]
):
    """Make a Factory of ``f(input, messages, ctx) -> output``; call it with a context.

    ``raw=True`` is the opt-in to raw text, as for ``@tool``: ``f`` returns ``str``.
    """

    def decorate(func: FactoryFunc) -> Factory[Any, Any, Any]:
        input_type, output_types = _signature_types(func, 3, raw=raw)
        factory_name = name or func.__name__
        parents = _normalize_parents(chained_to, factory_name)
        if chain_condition is not None and not parents:
            raise ToolDefinitionError(f"{factory_name}: chain_condition needs chained_to")
        return Factory(
            _raw_body(func, factory_name) if raw else func,
            name=factory_name,
            instruction=_instruction(func),
            input_type=input_type,
            output_types=output_types,
            chained_to=parents,
            chain_condition=chain_condition,
            raw=raw,
        )

    return decorate(func) if func is not None else cast(FactoryDecorator, decorate)
