"""One exchange with an authorized client, the parts that need no server state: its log line,
its framing and sending, and the supervision of its run while the client is watched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from roboz_helper import host_paths, protocol, runs
from roboz_helper.egress.config import EgressConfig
from roboz_helper.egress.proxy import EgressSession
from roboz_helper.log_format import fields
from roboz_helper.peer import PeerCredentials
from roboz_helper.policy import Profile
from roboz_helper.protocol import Request, RunCompletion
from roboz_helper.sandbox import SandboxError, SandboxSpec, run_in_sandbox

log = logging.getLogger("roboz_helper")

# A peer that does not read its replies must not hold a handler forever.
SEND_TIMEOUT_S = 5.0
# Grace on top of a run's own deadline for a client to take its output, before it counts as gone.
_DRAIN_GRACE_S = 10.0


@dataclass(frozen=True)
class Client:
    """An authorized peer and the rules it was greeted with."""

    peer: PeerCredentials
    profile_name: str
    profile: Profile
    max_runs: int
    egress: EgressConfig  # how the policy that greeted it reaches the network (allowlists)


class RunRecord:
    """The one log line of an exchange: who, under which profile, what, how it ended."""

    def __init__(self, client: Client, what: dict[str, str], run_id: str | None = None) -> None:
        self.client = client
        self.what = what
        self.run_id = run_id
        self.started = time.monotonic()

    def __call__(
        self, status: protocol.Status, level: int = logging.INFO, **outcome: object
    ) -> None:
        peer = self.client.peer
        log.log(
            level,
            "run %s",
            fields(
                uid=peer.uid,
                pid=peer.pid,
                profile=self.client.profile_name,
                run=self.run_id,
                **self.what,
                status=status,
                **outcome,
                duration=f"{time.monotonic() - self.started:.3f}s",
            ),
        )


async def supervise(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    profile: Profile,
    spec: SandboxSpec,
    on_client_gone: Callable[[], None] = lambda: None,
    network: EgressSession | None = None,
) -> RunCompletion | None:
    """Run the sandbox while watching the client; None if the client went away
    (``on_client_gone`` is called then, before the run is killed). ``network``: the run's
    egress proxy session (a profile with an allowlist), which ends with the run."""
    gone = asyncio.Event()
    drain_timeout = profile.timeout_s + _DRAIN_GRACE_S

    async def on_output(fd: int, chunk: bytes) -> None:
        if gone.is_set() or writer.is_closing():
            gone.set()
            return
        for frame in protocol.split_output("stdout" if fd == 1 else "stderr", chunk):
            writer.write(protocol.encode_frame(frame))
        try:
            await asyncio.wait_for(writer.drain(), drain_timeout)
        except (ConnectionError, TimeoutError):
            gone.set()  # never raise into the sandbox; the watcher cancels the run

    run = asyncio.create_task(run_in_sandbox(spec, on_output, network))
    watch = asyncio.create_task(client_gone(reader, gone))
    try:
        await asyncio.wait({run, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Reached normally, on disconnect, and when this handler is cancelled at shutdown.
        watch.cancel()
        if not run.done():
            if watch.done():
                on_client_gone()
            run.cancel()
        await asyncio.wait({run, watch})
    if run.cancelled():
        return None
    exc = run.exception()
    if exc is not None:
        # A refused set-up step is reported, not a crash: its traceback only helps at DEBUG.
        traceback = not isinstance(exc, SandboxError) or log.isEnabledFor(logging.DEBUG)
        log.error(
            "sandbox_failed %s",
            fields(run=spec.run_id, error=f"{type(exc).__name__}: {exc}"),
            exc_info=exc if traceback else None,
        )
        return RunCompletion(status="failed", diagnostic=f"sandbox error: {exc}")
    return runs.completion_of(run.result())


def refusal_for(problems: list[host_paths.PathProblem]) -> str | None:
    """The refusal for a profile whose paths the host no longer provides, if so."""
    if not problems:
        return None
    return (
        f"this profile cannot run on this host: {problems[0]} "
        "(the helper's administrator can run `roboz-helper check-policy` on its policy)"
    )


async def read_request(reader: asyncio.StreamReader) -> Request:
    length = protocol.parse_length(await reader.readexactly(protocol.HEADER.size))
    return protocol.decode_request(await reader.readexactly(length))


async def client_gone(reader: asyncio.StreamReader, gone: asyncio.Event) -> None:
    """Finish when the client hangs up (EOF), sends anything more, or stops taking output.

    A client sends one request at a time (a kept connection's next one only after this run's
    completion), so more bytes during a run are a violation and end the run too.
    """
    read = asyncio.ensure_future(reader.read(1))
    flagged = asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait({read, flagged}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        read.cancel()
        flagged.cancel()
        await asyncio.wait({read, flagged})


async def send(
    writer: asyncio.StreamWriter,
    message: protocol.Response,
    timeout: float = SEND_TIMEOUT_S,
) -> None:
    if writer.is_closing():
        return
    writer.write(protocol.encode_frame(message))
    await asyncio.wait_for(writer.drain(), timeout)
