"""Serving an authorized request: a run (within the client's run slots) or a listing of the
profile's scripts. The run itself and its report are exchange.py's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter

import msgspec

from roboz_helper import host_paths, protocol, runs, scripts
from roboz_helper.exchange import SEND_TIMEOUT_S, Client, RunRecord, refusal_for, send, supervise
from roboz_helper.policy import PolicyError
from roboz_helper.protocol import ExecCommand, RunCompletion, RunScript, ScriptEntry

# How long a request waits for the slot of a run whose client went away (being killed; the
# sandbox's kill takes milliseconds, its retry comes after a second) before it is busy.
ENDING_RUN_WAIT_S = 2.0


class RunSlots:
    """Runs in progress per client uid (at most the client's ``max_runs``), and those of them
    whose client went away and that are being killed: their slots free within moments."""

    def __init__(self) -> None:
        self.running: Counter[int] = Counter()
        self.ending: Counter[int] = Counter()
        self._freed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._freed is None:
            self._freed = asyncio.Condition()
        return self._freed

    async def free(self, uid: int, max_runs: int) -> bool:
        """Whether ``uid`` may start a run. A client that hangs up and asks again at once
        finds its old run still being killed (that takes a few milliseconds): wait for that,
        briefly, rather than answer busy."""
        if self.running[uid] >= max_runs and self.ending[uid]:

            def free_or_nothing_ending() -> bool:
                return self.running[uid] < max_runs or not self.ending[uid]

            with contextlib.suppress(TimeoutError):
                async with self._condition():
                    await asyncio.wait_for(
                        self._condition().wait_for(free_or_nothing_ending), ENDING_RUN_WAIT_S
                    )
        return self.running[uid] < max_runs

    def take(self, uid: int) -> None:
        self.running[uid] += 1

    def client_gone(self, uid: int) -> None:
        self.ending[uid] += 1

    async def release(self, uid: int, was_ending: bool) -> None:
        _decrement(self.running, uid)
        if was_ending:
            _decrement(self.ending, uid)
        async with self._condition():
            self._condition().notify_all()


def _decrement(counter: Counter[int], uid: int) -> None:
    counter[uid] -= 1
    if counter[uid] <= 0:
        del counter[uid]


async def serve_run(
    slots: RunSlots,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    client: Client,
    request: RunScript | ExecCommand,
    keep_open: bool = False,
) -> bool:
    """Serve one run request; True if its completion kept the connection open."""
    peer, profile = client.peer, client.profile
    run_id = runs.new_run_id()
    record = RunRecord(client, runs.request_fields(request), run_id)
    if not await slots.free(peer.uid, client.max_runs):
        record("busy")
        diagnostic = f"uid {peer.uid} already has {client.max_runs} runs in progress"
        await send(writer, RunCompletion(status="busy", diagnostic=diagnostic))
        return False
    unusable = refusal_for(host_paths.run_problems(client.profile_name, profile))
    if unusable is not None:
        record("refused", logging.WARNING, reason=unusable)
        await send(writer, RunCompletion(status="refused", diagnostic=unusable))
        return False
    script_fd: int | None = None
    try:
        if isinstance(request, RunScript):
            runs.check_args(request.args)
            script_fd = scripts.open_script(profile.scripts_dir, request.path)
            argv = [request.path, *request.args]
        else:
            argv = runs.exec_argv(profile, request)
        spec = runs.build_spec(profile, argv, script_fd, run_id, request.file_policy)
        network = runs.network_session(
            client.profile_name, profile, request.network_allow, client.egress
        )
    except (scripts.ScriptRefused, runs.RunRefused, PolicyError) as exc:
        if script_fd is not None:
            os.close(script_fd)
        record("refused", reason=str(exc))
        await send(writer, RunCompletion(status="refused", diagnostic=str(exc)))
        return False

    slots.take(peer.uid)
    ending = False

    def client_gone() -> None:
        nonlocal ending
        ending = True
        slots.client_gone(peer.uid)

    try:
        completion = await supervise(reader, writer, profile, spec, client_gone, network)
    except asyncio.CancelledError:
        record("killed", reason="helper shutting down")
        raise
    finally:
        await slots.release(peer.uid, ending)
        if script_fd is not None:
            os.close(script_fd)
    if completion is None:
        record("killed", reason="client disconnected")
        return False
    traffic, refused = runs.network_summary(completion)
    record(
        completion.status,
        exit=completion.exit_code,
        signal=completion.signal,
        limit=completion.limit,
        diagnostic=None if completion.status == "success" else completion.diagnostic,
        network=traffic,
        refused=refused,
    )
    if keep_open:
        completion = msgspec.structs.replace(completion, keep_open=True)
    await send(writer, completion)
    return keep_open


async def serve_listing(writer: asyncio.StreamWriter, client: Client) -> None:
    """The scripts of the client's profile, one frame each, then a "listed" completion."""
    record = RunRecord(client, {"kind": "list"})
    profile = client.profile
    unusable = refusal_for(host_paths.listing_problems(client.profile_name, profile))
    if unusable is not None:
        record("refused", logging.WARNING, reason=unusable)
        await send(writer, RunCompletion(status="refused", diagnostic=unusable))
        return
    try:
        entries = await asyncio.to_thread(scripts.list_scripts, profile.scripts_dir)
    except OSError as exc:
        diagnostic = f"scripts directory unavailable: {exc.strerror}"
        record("failed", logging.WARNING, reason=diagnostic)
        await send(writer, RunCompletion(status="failed", diagnostic=diagnostic))
        return
    for entry in entries:
        writer.write(
            protocol.encode_frame(ScriptEntry(name=entry.name, description=entry.description))
        )
        await asyncio.wait_for(writer.drain(), SEND_TIMEOUT_S)
    await send(writer, RunCompletion(status="listed", diagnostic=f"{len(entries)} scripts"))
    record("listed", scripts=len(entries))
