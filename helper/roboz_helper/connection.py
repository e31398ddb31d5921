"""One accepted connection: its peer authorized by kernel credentials (SO_PEERCRED) under the
policy in force when it was accepted, greeted, then its requests served one after another.

A client that asks for it (``keep_open``) sends several run requests on one connection, one
at a time; a later one is served only while the policy that greeted the connection is still
in force (after a reload the helper answers Closing, unread, and the client reconnects and
is authorized, or refused, by the new policy). Between requests the connection is idle, and
an idle one may give its slot to a new connection at the limit (see server.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from roboz_helper import protocol, runs
from roboz_helper.exchange import Client, read_request, send
from roboz_helper.log_format import fields
from roboz_helper.peer import PeerCredentials, peer_credentials
from roboz_helper.policy import Policy, match_client
from roboz_helper.protocol import (
    Closing,
    ExecCommand,
    FrameError,
    Greeting,
    ListScripts,
    ProtocolError,
    RunCompletion,
    RunScript,
)
from roboz_helper.running import serve_listing, serve_run

if TYPE_CHECKING:
    from roboz_helper.server import HelperServer

log = logging.getLogger("roboz_helper")

# A kept connection (keep_open) takes at most this many requests, then closes after the last
# completion; between requests it waits as long as a new connection waits for its first
# (server.handshake_timeout_s).
MAX_REQUESTS_PER_CONNECTION = 100


class ConnectionState:
    """What a connection's handler is doing, for its last message."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task
        self.idle = False  # a kept connection between requests
        self.evicted = False  # closed while idle to admit a new connection at the limit


async def converse(
    server: HelperServer,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    policy: Policy,
    state: ConnectionState,
) -> None:
    """The whole exchange of an admitted connection under ``policy``."""
    try:
        peer = peer_credentials(writer.get_extra_info("socket"))
    except OSError as exc:
        await send(
            writer, RunCompletion(status="refused", diagnostic=f"no peer credentials: {exc}")
        )
        return
    profile_name = match_client(policy, peer.uid, peer.gid, peer.groups)
    if profile_name is None:
        log.info(
            "refused %s",
            fields(uid=peer.uid, gid=peer.gid, pid=peer.pid, reason="no [[clients]] rule"),
        )
        await send(
            writer,
            RunCompletion(
                status="refused",
                diagnostic=f"uid {peer.uid} (gid {peer.gid}) is not authorized "
                "by the helper's policy",
            ),
        )
        return
    profile = policy.profiles[profile_name]
    await send(
        writer,
        Greeting(
            protocol_version=protocol.PROTOCOL_VERSION,
            helper_version=server.version,
            profile=profile_name,
            uid=peer.uid,
            limits=runs.limits_of(profile, policy.server.max_runs_per_client),
        ),
    )
    try:
        request = await asyncio.wait_for(read_request(reader), policy.server.handshake_timeout_s)
    except TimeoutError:
        await send(
            writer,
            ProtocolError(message=f"no request within {policy.server.handshake_timeout_s:g}s"),
        )
        return
    except FrameError as exc:
        log.info("protocol_error %s", fields(uid=peer.uid, pid=peer.pid, error=str(exc)))
        await send(writer, ProtocolError(message=str(exc)))
        return
    except asyncio.IncompleteReadError:
        return  # the client hung up before finishing its request

    client = Client(peer, profile_name, profile, policy.server.max_runs_per_client, policy.egress)
    if isinstance(request, ListScripts):
        await serve_listing(writer, client)
        return
    served = 1
    while await serve_run(
        server.slots,
        reader,
        writer,
        client,
        request,
        request.keep_open and served < MAX_REQUESTS_PER_CONNECTION,
    ):
        state.idle = True  # left set if cancelled: shutdown then says Closing
        server.idle_kept.add(state)
        next_request = await _next_request(server, reader, writer, policy, peer)
        server.idle_kept.discard(state)
        state.idle = False
        if next_request is None:
            return
        request = next_request
        served += 1


async def _next_request(
    server: HelperServer,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    policy: Policy,
    peer: PeerCredentials,
) -> RunScript | ExecCommand | None:
    """The next request on a kept connection, or None when the connection ends here."""
    timeout = policy.server.handshake_timeout_s
    try:
        request = await asyncio.wait_for(read_request(reader), timeout)
    except TimeoutError:
        await send(writer, Closing(reason=f"no request within {timeout:g}s"))
        return None
    except FrameError as exc:
        log.info("protocol_error %s", fields(uid=peer.uid, pid=peer.pid, error=str(exc)))
        await send(writer, ProtocolError(message=str(exc)))
        return None
    except asyncio.IncompleteReadError:
        return None  # the client hung up, between requests or inside one
    if server.policy is not policy:
        # Checked after the read, so a request that raced the reload is refused unread too.
        await send(writer, Closing(reason="the helper's policy was reloaded"))
        return None
    if isinstance(request, ListScripts):
        await send(writer, ProtocolError(message="list_scripts on a kept connection"))
        return None
    return request
