"""The helper socket as a dependency: each way of being unusable has its own reason code.

The helpers here are stand-ins that speak the real wire protocol; the real daemon is checked
in tests/shed/capabilities.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from roboz_helper import protocol
from roboz_helper.protocol import Greeting, Limits, RunCompletion

from roboz.shed.dependency_health import HelperSocketDependency

LIMITS = Limits(
    timeout_s=5.0,
    max_output_bytes=1024,
    pids_max=8,
    memory_max_bytes=1 << 20,
    cpu_time_s=5,
    max_file_bytes=1024,
    tmp_size_bytes=1024,
    nofile_max=16,
    network="none",
    max_runs=1,
)


class OneFrameHelper:
    """Accepts connections and answers each with one frame, then closes."""

    def __init__(self, path: Path, frame: Greeting | RunCompletion) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.frame = frame
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(protocol.encode_frame(self.frame))

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()


@pytest.fixture
def socket_path(tmp_path: Path) -> Path:
    return tmp_path / "helper.sock"


@pytest.fixture
def fake_helper(socket_path: Path, request: pytest.FixtureRequest) -> Iterator[OneFrameHelper]:
    helper = OneFrameHelper(socket_path, request.param)
    try:
        yield helper
    finally:
        helper.close()


def test_a_missing_socket(socket_path: Path) -> None:
    failure = HelperSocketDependency(str(socket_path)).check()
    assert failure is not None
    assert failure.reason_code == "helper_socket_missing"
    assert str(socket_path) in failure.message


def test_a_dead_helper_leaves_a_socket_nobody_answers(socket_path: Path) -> None:
    # A daemon that was killed leaves its socket file behind with nothing listening.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path))
    stale.close()
    failure = HelperSocketDependency(str(socket_path)).check()
    assert failure is not None
    assert failure.reason_code == "helper_not_running"
    assert "restart roboz-helper" in failure.message


def test_a_file_that_is_not_a_socket(socket_path: Path) -> None:
    socket_path.write_text("")
    failure = HelperSocketDependency(str(socket_path)).check()
    assert failure is not None and failure.reason_code == "helper_socket_invalid"


@pytest.mark.parametrize(
    "fake_helper",
    [
        Greeting(
            protocol_version=protocol.PROTOCOL_VERSION + 1,
            helper_version="9.0",
            profile="p",
            uid=65534,
            limits=LIMITS,
        )
    ],
    indirect=True,
)
def test_a_helper_speaking_another_protocol_version(
    socket_path: Path, fake_helper: OneFrameHelper
) -> None:
    failure = HelperSocketDependency(str(socket_path)).check()
    assert failure is not None
    assert failure.reason_code == "helper_protocol_mismatch"
    assert f"protocol {protocol.PROTOCOL_VERSION + 1}" in failure.message


@pytest.mark.parametrize(
    "fake_helper",
    [RunCompletion(status="refused", diagnostic="no [[clients]] rule matches uid 0")],
    indirect=True,
)
def test_a_helper_that_refuses_this_client(socket_path: Path, fake_helper: OneFrameHelper) -> None:
    failure = HelperSocketDependency(str(socket_path)).check()
    assert failure is not None
    assert failure.reason_code == "helper_refused"
    assert "no [[clients]] rule matches uid 0" in failure.message


@pytest.mark.parametrize(
    "fake_helper",
    [
        Greeting(
            protocol_version=protocol.PROTOCOL_VERSION,
            helper_version="1.0",
            profile="p",
            uid=65534,
            limits=LIMITS,
        )
    ],
    indirect=True,
)
def test_a_helper_that_greets_properly_is_usable(
    socket_path: Path, fake_helper: OneFrameHelper
) -> None:
    assert HelperSocketDependency(str(socket_path)).check() is None
