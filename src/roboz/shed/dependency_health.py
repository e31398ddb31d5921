"""Health of the Shed's external resources: the helper socket, executables, LLM endpoints,
and a monitor that remembers the last result of each so logs show only what changed."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from roboz.dependencies import (
    DependencyFailure,
    ExternalDependency,
    LLMEndpointDependency,
    format_failure,
    safe_check,
)
from roboz.shed.safe_scripts.client import (
    ClientRefused,
    ConnectionLost,
    HelperBusy,
    HelperTimeout,
    HelperUnavailable,
    ProtocolMismatch,
    SafeScriptsClient,
    SafeScriptsError,
)

__all__ = [
    "DependencyHealthMonitor",
    "ExecutableDependency",
    "HealthRecord",
    "HelperSocketDependency",
    "LLMEndpointDependency",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HelperSocketDependency:
    """The SafeScripts helper daemon, reached through its Unix socket."""

    socket_path: str | os.PathLike[str]
    timeout: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "socket_path", os.fspath(self.socket_path))

    @property
    def name(self) -> str:
        return f"helper socket {self.socket_path}"

    def check(self) -> DependencyFailure | None:
        failure = self.check_socket_file()
        if failure is not None:
            return failure
        try:
            SafeScriptsClient(self.socket_path, timeout=self.timeout).check()
        except SafeScriptsError as error:
            return self._explain(error)
        return None

    def check_socket_file(self) -> DependencyFailure | None:
        """The part of ``check`` that needs no connection: is there a socket at the path?"""
        try:
            mode = os.stat(self.socket_path).st_mode
        except FileNotFoundError:
            return DependencyFailure(
                "helper_socket_missing",
                f"no helper socket at {self.socket_path}: roboz-helper is not running or "
                "listens elsewhere; start it (systemctl enable --now roboz-helper.socket, or "
                "roboz scripts serve --policy FILE) or pass the socket its policy's [server] "
                "socket names",
            )
        except OSError as error:
            return DependencyFailure.from_exception(
                error,
                reason_code="helper_socket_inaccessible",
                summary=f"cannot inspect {self.socket_path}",
            )
        if not stat.S_ISSOCK(mode):
            return DependencyFailure(
                "helper_socket_invalid", f"{self.socket_path} exists but is not a socket"
            )
        return None

    def _explain(self, error: SafeScriptsError) -> DependencyFailure:
        if isinstance(error, ProtocolMismatch):
            return DependencyFailure(
                "helper_protocol_mismatch",
                f"the helper at {self.socket_path} speaks another protocol: {error}; "
                "upgrade roboz and roboz-helper together",
            )
        if isinstance(error, ClientRefused):
            return DependencyFailure(
                "helper_refused",
                f"the helper at {self.socket_path} does not authorize this process "
                f"(uid {os.getuid()}): {error}; add a [[clients]] rule to its policy",
            )
        if isinstance(error, HelperBusy):
            return DependencyFailure("helper_busy", f"{error}; try again later")
        if isinstance(error, HelperTimeout):
            return DependencyFailure("helper_timeout", f"the helper did not answer: {error}")
        if isinstance(error, ConnectionLost):
            return DependencyFailure("helper_connection_lost", str(error))
        if isinstance(error, HelperUnavailable):
            # The socket file exists (checked above), so this is a stale socket left by a
            # helper that died, or a permission problem.
            if not os.access(self.socket_path, os.R_OK | os.W_OK):
                return DependencyFailure(
                    "helper_permission_denied",
                    f"{error}; this process may not connect to {self.socket_path}",
                )
            return DependencyFailure(
                "helper_not_running",
                f"{self.socket_path} exists but no helper answers on it (a stale socket of a "
                "helper that stopped); restart roboz-helper",
            )
        return DependencyFailure.from_exception(error, reason_code="helper_error")


@dataclass(frozen=True)
class ExecutableDependency:
    """A program a tool runs (rg, gio, bash), found on ``search_path`` or PATH."""

    executable: str
    purpose: str = ""
    search_path: str | None = None

    @property
    def name(self) -> str:
        return f"executable {self.executable}"

    def check(self) -> DependencyFailure | None:
        if shutil.which(self.executable, path=self.search_path) is not None:
            return None
        where = self.search_path if self.search_path is not None else os.environ.get("PATH", "")
        needed = f" (needed for {self.purpose})" if self.purpose else ""
        return DependencyFailure(
            "executable_missing",
            f"{self.executable} is not installed or not executable on PATH {where!r}{needed}",
        )


@dataclass(frozen=True)
class HealthRecord:
    """The latest observation of one dependency; ``since`` is when its state last changed."""

    name: str
    failure: DependencyFailure | None
    checked_at: datetime
    since: datetime

    @property
    def ok(self) -> bool:
        return self.failure is None


class DependencyHealthMonitor:
    """Checks dependencies on request and caches the latest record of each.

    Logging follows changes, not calls: a new or changed failure is a warning, a recovery is
    info, and a repeated observation is debug. Applications own the logging handlers.
    """

    def __init__(
        self,
        dependencies: Iterable[ExternalDependency] = (),
        *,
        log: logging.Logger | None = None,
    ) -> None:
        self._dependencies: dict[str, ExternalDependency] = {}
        self._records: dict[str, HealthRecord] = {}
        self._lock = threading.Lock()
        self._log = log or logger
        for dependency in dependencies:
            self.add(dependency)

    def add(self, dependency: ExternalDependency) -> str:
        """Watch ``dependency`` and return the key of its records; an equal one is watched
        once. A different resource with a taken name (two endpoints of one model) is keyed
        ``name #2``, ``name #3``... so no record or log line mixes two resources."""
        with self._lock:
            key, number = dependency.name, 1
            while key in self._dependencies:
                existing = self._dependencies[key]
                if existing is dependency or existing == dependency:
                    return key
                number += 1
                key = f"{dependency.name} #{number}"
            self._dependencies[key] = dependency
            return key

    @property
    def records(self) -> dict[str, HealthRecord]:
        """The cached records by key; dependencies never checked are absent."""
        with self._lock:
            return dict(self._records)

    def check(self, key: str) -> HealthRecord:
        with self._lock:
            dependency = self._dependencies[key]
        return self._observe(key, dependency)

    def check_all(self) -> dict[str, HealthRecord]:
        with self._lock:
            watched = list(self._dependencies.items())
        return {key: self._observe(key, dependency) for key, dependency in watched}

    def _observe(self, key: str, dependency: ExternalDependency) -> HealthRecord:
        failure = safe_check(dependency)
        now = datetime.now(UTC)
        with self._lock:
            previous = self._records.get(key)
            changed = previous is None or previous.failure != failure
            record = HealthRecord(
                name=key,
                failure=failure,
                checked_at=now,
                since=now if changed or previous is None else previous.since,
            )
            self._records[key] = record
        self._log_observation(key, previous, failure)
        return record

    def _log_observation(
        self, name: str, previous: HealthRecord | None, failure: DependencyFailure | None
    ) -> None:
        if failure is None:
            if previous is not None and previous.failure is not None:
                self._log.info("%s recovered", name)
            else:
                self._log.debug("%s ok", name)
        elif previous is not None and previous.failure == failure:
            self._log.debug("%s still failing: %s", name, format_failure(failure))
        else:
            self._log.warning("%s failing: %s", name, format_failure(failure))
