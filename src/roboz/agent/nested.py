"""Nested agents: an agent offered to another as a tool.

The parent's LLM (or a chain) invokes the tool with a typed input; the child runs to its
``Stop`` on a conversation of its initial messages plus the input as a user message, and the
Stop's value comes back as the tool's output. When the parent's run is persisted and the
child has a store (the parent's, unless it has its own), the child's conversation is its own
thread, linked to the parent's thread and tool call, so a user interface can open it.
Each call is a run of its own, so a child called twice at once (in parallel tool calls or
by two parents) keeps two conversations and two threads. Cancelling the parent cancels the
child's run. A child that fails raises NestedAgentError, which
keeps the child's messages and names its thread.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from roboz.agent.client_tools import ClientToolTurn
from roboz.agent.context import current_run
from roboz.agent.errors import AgentConfigurationError, AgentRunError
from roboz.agent.request import RunRequest
from roboz.agent.rows import action_of
from roboz.models import Empty, Message, Role, Str
from roboz.models.values import payload_json
from roboz.tools import Tool

if TYPE_CHECKING:
    from roboz.agent.agent import Agent
    from roboz.threads import ThreadStore

_CANCEL_POLL_S = 0.05
_MAX_CALLS_PER_TOOL_CALL = 1000


class NestedAgentError(RuntimeError):
    """A nested agent's run failed; ``messages`` are the child's, ``thread_id`` its thread.

    Raised inside the parent's tool, so the parent's run reports it as that tool's error
    (ToolExecutionError, with this as its cause) and keeps the parent's own messages.
    """

    def __init__(self, message: str, *, messages: list[Message], thread_id: str | None) -> None:
        super().__init__(message)
        self.messages = messages
        self.thread_id = thread_id


def _input_text(value: Empty) -> str:
    if isinstance(value, Str):
        return value.value
    return payload_json(value)


def _output(output_type: type[Empty], value: Any, label: str) -> Empty:
    if isinstance(value, output_type):
        return value
    try:
        if isinstance(value, Empty):
            return output_type.model_validate(value.model_dump())
        if isinstance(value, dict):
            return output_type.model_validate(value)
        return output_type.model_validate({"value": value})
    except ValidationError as error:
        raise TypeError(
            f"{label}: the child's Stop value {value!r} does not fit {output_type.__name__}: "
            f"{error}"
        ) from None


def agent_tool(
    child: Agent | Any,
    *,
    name: str | None = None,
    instruction: str | None = None,
    input_type: type[Empty] = Str,
    output_type: type[Empty] = Str,
    chained_to: str | Tool | list[str | Tool] | tuple[str | Tool, ...] = (),
) -> Tool:
    """``child`` as a tool of another agent (see the module docstring).

    ``child`` is an Agent or a DeployableAgent definition (built once, here; its background
    agents run beside each of its runs). ``instruction`` defaults to the child's description.
    The tool takes ``input_type`` and returns ``output_type``, built from the value of the
    child's Stop; a chain into it whose parent's output does not fit ``input_type`` fails
    when the parent agent is built, naming both.
    """
    if not hasattr(child, "new_run"):  # an Agent; anything else is built into one
        build = getattr(child, "build", None)
        if build is None:
            raise AgentConfigurationError(
                f"agent_tool needs an Agent or a DeployableAgent, got {child!r}"
            )
        child = build()[0]
    tool_name = name or child.name
    label = f"nested agent {child.name!r} (tool {tool_name!r})"
    if not (isinstance(input_type, type) and issubclass(input_type, Empty)):
        raise AgentConfigurationError(f"{label}: input_type must be an Empty subclass")
    if not (isinstance(output_type, type) and issubclass(output_type, Empty)):
        raise AgentConfigurationError(f"{label}: output_type must be an Empty subclass")
    text = instruction or child.description or f"Delegate a task to the agent {child.name!r}."

    def run(value: Empty, messages: list[Message]) -> Empty:
        parent = current_run()
        conversation = [
            *child.initial_messages,
            Message(role=Role.USER, content=_input_text(value)),
        ]
        thread_id = None
        parent_thread_id = parent_tool_use_id = None
        store = child.store
        parent_thread = parent.thread_id if parent is not None else None
        if parent is not None and parent_thread is not None:
            if store is None:
                store = parent.store
            last_seq = parent.transcript.last_seq
            parent_thread_id = parent_thread
            if last_seq is not None:
                # The parent's tool running now answers the LLM's action when the last
                # message is one (this tool, or a tool of the parent's that calls it); when a
                # chain or a default ran it, the parent's thread mints the call on the row
                # of that tool's result, the next one.
                invoked = action_of(parent.transcript.messages[-1]) is not None
                parent_tool_use_id = f"tu_{last_seq if invoked else last_seq + 1}"
            # Named after the call, so a resumed parent (another process) never reuses one.
            call = parent_tool_use_id or f"x{uuid.uuid4().hex[:12]}"
            thread_id = f"{parent_thread}.{tool_name}.{call}"
        if thread_id is None:
            store = None  # the child's own store (if any) keeps a thread of its own
        elif store is not None:
            thread_id = _create_child_thread(
                store, thread_id, child.name, parent_thread_id, parent_tool_use_id
            )
        else:
            thread_id = None
        child_run = child.new_run(conversation, thread_id, RunRequest(), store=store)
        done = threading.Event()
        watcher = None
        parent_cancel = parent.cancel if parent is not None else None
        if parent_cancel is not None:
            if parent_cancel.is_set():
                raise NestedAgentError(
                    f"{label}: the parent was cancelled", messages=conversation, thread_id=None
                )

            def watch() -> None:
                while not done.wait(_CANCEL_POLL_S):
                    if parent_cancel.is_set():
                        child_run.cancel()  # this call's run only, never a sibling's
                        return

            watcher = threading.Thread(target=watch, name=f"roboz-nested-{tool_name}", daemon=True)
            watcher.start()
        try:
            result = child_run.run_sync()
        except AgentRunError as error:
            raise NestedAgentError(
                f"{label} failed: {error}",
                messages=list(error.messages),
                thread_id=thread_id,
            ) from error
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        if isinstance(result, ClientToolTurn):  # the child offers no client tools
            raise NestedAgentError(
                f"{label} waits for client tools", messages=result.messages, thread_id=thread_id
            )
        return _output(output_type, result[0].value, label)

    tool = Tool(
        name=tool_name,
        instruction=text,
        input_type=input_type,
        output_types=(output_type,),
        func=run,
        chained_to=_names(chained_to),
    )
    return tool


def _create_child_thread(
    store: ThreadStore,
    thread_id: str,
    agent: str,
    parent_thread_id: str | None,
    parent_tool_use_id: str | None,
) -> str:
    """Create the child's thread, linked to its parent's, before the child's first message
    (so the link is there from the start). One tool call of the parent that runs the child
    more than once (a tool fanning out to it) gives each run a thread of its own: the first
    is named after the call, the next ``.2``, ``.3``, ..."""
    for attempt in range(1, _MAX_CALLS_PER_TOOL_CALL + 1):
        name = thread_id if attempt == 1 else f"{thread_id}.{attempt}"
        try:
            store.create_thread(
                org_id="local",
                created_by=agent,
                thread_id=name,
                created_from_agent_id=agent,
                parent_thread_id=parent_thread_id,
                parent_tool_use_id=parent_tool_use_id,
            )
        except ValueError:  # taken: another run of the child in the same tool call
            continue
        return name
    raise AgentConfigurationError(
        f"tool call {parent_tool_use_id!r} of thread {parent_thread_id!r} ran the nested agent "
        f"{agent!r} more than {_MAX_CALLS_PER_TOOL_CALL} times"
    )


def _names(chained_to: str | Tool | Sequence[str | Tool]) -> tuple[str, ...]:
    parents: Sequence[str | Tool] = (
        [chained_to] if isinstance(chained_to, str | Tool) else chained_to
    )
    return tuple(p.name if isinstance(p, Tool) else str(p) for p in parents)
