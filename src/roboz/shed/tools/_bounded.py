"""One summarizer call with a time limit, shared by compaction and the Librarian's steps."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from roboz.llm import EndpointLike, call_llm_api
from roboz.models import Message


def call_bounded(
    endpoint: EndpointLike, request: Sequence[Message], timeout_s: float, *, thread_name: str
) -> str:
    """The reply's text, or TimeoutError after ``timeout_s`` (the call is asked to cancel)."""
    cancel = threading.Event()
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(call_llm_api(endpoint, request, cancel=cancel)[0])
        except BaseException as error:  # handed to the caller below
            outcome.append(error)

    # A worker thread, so a call that hangs past the limit is abandoned rather than waited on.
    worker = threading.Thread(target=call, name=thread_name, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        cancel.set()  # an endpoint that supports cancelling abandons the call
        raise TimeoutError(f"the summarizer did not answer within {timeout_s:g} s")
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return str(result)
