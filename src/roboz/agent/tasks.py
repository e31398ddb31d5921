"""A task list the LLM keeps on its thread: create, start, complete, reorder.

At most one task is in progress at a time; starting another while one is, is a tool error the
LLM sees (a ``Retry``). Positions are always 0..n-1 in list order. Every change replaces the
thread's task snapshot, so user interfaces get it in their next delta. Add ``TASK_TOOLS`` to
an agent's tools.
"""

from __future__ import annotations

from pydantic import Field

from roboz.agent.context import current_turn
from roboz.agent.turn import Turn
from roboz.models import Empty, Message, Str
from roboz.threads import AgentTask, AgentTaskStatus
from roboz.tools import Retry, tool


class NewTask(Empty):
    title: str = Field(min_length=1, description="What the task is, in a few words.")
    position: int | None = Field(
        default=None, ge=0, description="Where to insert it (0 = first); omitted: at the end."
    )


class TaskRef(Empty):
    task_id: int = Field(description="The id of the task, as listed.")


class TaskOrder(Empty):
    task_ids: list[int] = Field(description="Every task id, in the new order.")


def _turn() -> Turn:
    turn = current_turn()
    if turn is None:
        raise RuntimeError("the task tools work only inside a running agent")
    return turn


def _renumber(tasks: list[AgentTask]) -> None:
    for position, task in enumerate(tasks):
        task.position = position


def _listing(tasks: list[AgentTask]) -> Str:
    lines = [f"{t.position}. [{t.status.value}] #{t.task_id} {t.title}" for t in tasks]
    return Str(value="Tasks:\n" + "\n".join(lines) if lines else "No tasks.")


def _find(tasks: list[AgentTask], task_id: int) -> AgentTask:
    for task in tasks:
        if task.task_id == task_id:
            return task
    known = ", ".join(f"#{t.task_id}" for t in tasks) or "none"
    raise Retry(f"there is no task #{task_id} (tasks: {known})")


@tool
def create_task(input: NewTask, messages: list[Message]) -> Str:
    """Add a task to the task list (pending until started)."""
    turn = _turn()
    tasks = sorted(turn.tasks, key=lambda t: t.position)
    task_id = max((t.task_id for t in tasks), default=0) + 1
    at = len(tasks) if input.position is None else min(input.position, len(tasks))
    tasks.insert(at, AgentTask(task_id=task_id, position=at, title=input.title))
    _renumber(tasks)
    turn.tasks = tasks
    turn.save_tasks()
    return _listing(tasks)


@tool
def start_task(input: TaskRef, messages: list[Message]) -> Str:
    """Mark a task in progress. Only one task may be in progress: complete it first."""
    turn = _turn()
    task = _find(turn.tasks, input.task_id)
    busy = [t for t in turn.tasks if t.status is AgentTaskStatus.IN_PROGRESS and t is not task]
    if busy:
        raise Retry(
            f"task #{busy[0].task_id} {busy[0].title!r} is in progress; complete it before "
            f"starting #{task.task_id}"
        )
    if task.status in (AgentTaskStatus.COMPLETED, AgentTaskStatus.CANCELLED):
        raise Retry(f"task #{task.task_id} is {task.status.value} and cannot be started")
    task.status = AgentTaskStatus.IN_PROGRESS
    turn.save_tasks()
    return _listing(turn.tasks)


@tool
def complete_task(input: TaskRef, messages: list[Message]) -> Str:
    """Mark a task completed."""
    turn = _turn()
    task = _find(turn.tasks, input.task_id)
    if task.status is AgentTaskStatus.CANCELLED:
        raise Retry(f"task #{task.task_id} was cancelled and cannot be completed")
    task.status = AgentTaskStatus.COMPLETED
    turn.save_tasks()
    return _listing(turn.tasks)


@tool
def reorder_tasks(input: TaskOrder, messages: list[Message]) -> Str:
    """Put the tasks in a new order; list every task id exactly once."""
    turn = _turn()
    held = sorted(t.task_id for t in turn.tasks)
    if sorted(input.task_ids) != held:
        raise Retry(f"reorder_tasks needs every task id exactly once: {held}, got {input.task_ids}")
    by_id = {t.task_id: t for t in turn.tasks}
    tasks = [by_id[task_id] for task_id in input.task_ids]
    _renumber(tasks)
    turn.tasks = tasks
    turn.save_tasks()
    return _listing(tasks)


TASK_TOOLS = (create_task, start_task, complete_task, reorder_tasks)
"""The task-list tool set."""
