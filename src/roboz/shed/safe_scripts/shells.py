"""What the SafeScripts clients' shells share besides the protocol (core.py): their
settings, what a failed connect means, and the kept connections between runs, which belong
to the process and identity that connected (the helper authorized the connection by its
peer credentials)."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypeVar

from roboz_helper.file_policy import FilePolicy

from roboz.shed.guard._policy import PermissionPolicy
from roboz.shed.safe_scripts.results import (
    HelperBusy,
    HelperTimeout,
    HelperUnavailable,
    SafeScriptsError,
)

DEFAULT_CAPTURE_BYTES = 1 << 20
# Idle kept connections a client holds at most (each holds one of the helper's connections).
MAX_IDLE_CONNECTIONS = 16


@dataclass(frozen=True)
class ClientSettings:
    """Where the helper is and how a client talks to it; both clients are made from one
    (``from_settings``), so nothing is lost between them."""

    socket_path: str
    timeout: float = 10.0
    max_capture_bytes: int = DEFAULT_CAPTURE_BYTES
    reuse_connections: bool = True
    # Every run of the client is narrowed by it (the agent's guarded-files policy).
    file_policy: FilePolicy | None = None
    # Every run asks for at most these hosts of its profile's network allowlist (entries in
    # the allowlist's syntax, each within the profile's); None: the profile's whole list.
    network_allow: tuple[str, ...] | None = None

    @classmethod
    def of(
        cls,
        socket_path: str | os.PathLike[str],
        timeout: float,
        max_capture_bytes: int,
        reuse_connections: bool,
        file_policy: PermissionPolicy | FilePolicy | None,
        network_allow: Sequence[str] | None = None,
    ) -> ClientSettings:
        wire = file_policy.file_policy if isinstance(file_policy, PermissionPolicy) else file_policy
        hosts = _network_allow(network_allow)
        path = os.fspath(socket_path)
        return cls(path, timeout, max_capture_bytes, reuse_connections, wire, hosts)


def _network_allow(entries: Sequence[str] | None) -> tuple[str, ...] | None:
    if entries is None:
        return None
    if isinstance(entries, str):  # one entry, not a sequence of its characters
        raise TypeError("network_allow: a sequence of entries (['pypi.org:443']), not a str")
    if not all(isinstance(e, str) for e in entries):
        raise TypeError("network_allow: every entry is a str ('host:port')")
    return tuple(entries)


def connect_error(exc: OSError, socket_path: str) -> SafeScriptsError:
    """What a failed connect to ``socket_path`` means for the caller."""
    if isinstance(exc, FileNotFoundError):
        return HelperUnavailable(f"no helper socket at {socket_path}; is roboz-helper running?")
    if isinstance(exc, ConnectionRefusedError):
        return HelperUnavailable(f"nothing is listening on {socket_path}; is roboz-helper running?")
    if isinstance(exc, PermissionError):
        return HelperUnavailable(
            f"permission denied on {socket_path}; is this user in the helper's group?"
        )
    if isinstance(exc, TimeoutError):
        return HelperTimeout(f"connecting to {socket_path} timed out")
    if exc.errno == errno.EAGAIN:  # listen backlog full
        return HelperBusy(f"the helper at {socket_path} is overloaded")
    return HelperUnavailable(f"cannot connect to {socket_path}: {exc}")


def owner() -> tuple[int, int, int]:
    """Who a connection speaks for: the helper saw this process and identity at connect."""
    return os.getpid(), os.geteuid(), os.getegid()


class KeptConnection(Protocol):
    owner: tuple[int, int, int]

    def close(self) -> None: ...


C = TypeVar("C", bound=KeptConnection)


class IdleConnections(Generic[C]):
    """A client's kept connections between runs (one run at a time on each)."""

    def __init__(self) -> None:
        self._conns: list[C] = []
        self._lock = threading.Lock()

    def take(self, usable: Callable[[C], bool]) -> C | None:
        """An idle connection of this process and identity that ``usable`` accepts; the
        others are closed, but for those inherited over fork (the parent's to use or close)."""
        me = owner()
        while True:
            with self._lock:
                if not self._conns:
                    return None
                conn = self._conns.pop()
            if conn.owner == me and usable(conn):
                return conn
            if conn.owner[0] == me[0]:
                conn.close()

    def keep(self, conn: C) -> None:
        with self._lock:
            if len(self._conns) < MAX_IDLE_CONNECTIONS:
                self._conns.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the idle kept connections (a later run connects again)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()


class ClientBase(Generic[C]):
    """What both clients hold: their settings and their idle kept connections."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        timeout: float = 10.0,
        max_capture_bytes: int = DEFAULT_CAPTURE_BYTES,
        reuse_connections: bool = True,
        file_policy: PermissionPolicy | FilePolicy | None = None,
        network_allow: Sequence[str] | None = None,
    ) -> None:
        self.settings = ClientSettings.of(
            socket_path, timeout, max_capture_bytes, reuse_connections, file_policy, network_allow
        )
        self.idle: IdleConnections[C] = IdleConnections()

    @classmethod
    def from_settings(cls, settings: ClientSettings) -> Self:
        """A client with exactly these settings (e.g. another client's)."""
        client = cls(settings.socket_path)
        client.settings = settings
        return client

    @property
    def socket_path(self) -> str:
        return self.settings.socket_path

    @property
    def timeout(self) -> float:
        return self.settings.timeout

    @property
    def max_capture_bytes(self) -> int:
        return self.settings.max_capture_bytes

    @property
    def reuse_connections(self) -> bool:
        return self.settings.reuse_connections

    @property
    def file_policy(self) -> FilePolicy | None:
        return self.settings.file_policy

    @property
    def network_allow(self) -> tuple[str, ...] | None:
        return self.settings.network_allow

    def close(self) -> None:
        """Close the idle kept connections (a later run connects again)."""
        self.idle.close()
