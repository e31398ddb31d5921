"""The fork server of ``tests/forked.py``: imports the library and what its commands import,
then forks a child per request that runs ``-m roboz.cli ARGS`` or ``SCRIPT ARGS`` as a fresh
interpreter would.

It runs as a script (not ``tests.forkserver``) so that no package of this repository is
imported into the children: a test's project may have a ``tests`` package of its own. Its
socket (``SOCK_SEQPACKET``, from the worker) carries a JSON request with three descriptors
(stdin, stdout, stderr), then two answers: the child's pid and its wait status. The server ends
when that socket closes (its worker ended).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import socket
import sys
import threading
import traceback

PRELOAD = (
    "roboz",
    "roboz.cli.app",
    "roboz.agent",
    "roboz.threads",
    "roboz.shed",
    "openai",
    "fastapi",
    "uvicorn",
    "roboz.server.app",
    "mcp",
    "roboz.mcp",
    "dbos",
    "roboz.durable",
    "psycopg",
    "pypdf",
)
"""What commands and the docs' examples import; extras that are not installed are skipped."""


def _preload() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            module = importlib.import_module(name)
            # A package of the tests taken for a library (tests/mcp for mcp) breaks every child.
            if (module.__file__ or "").startswith(here + os.sep):
                raise SystemExit(f"forkserver: {name} was imported from {module.__file__}")
    # A fork copies only the thread that calls it: a lock held by another thread would stay
    # held in every child. Nothing above may start one.
    if threading.active_count() != 1:
        raise SystemExit(f"forkserver: imports started threads: {threading.enumerate()}")
    # The children share the heap: frozen, a collection in a child does not walk (and so copy)
    # every page of it.
    gc.collect()
    gc.freeze()


def _receive(control: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
    if not message:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return json.loads(message), list(fds)


def _serve(control: socket.socket) -> tuple[dict[str, object], list[int]]:
    """Until the worker goes: returns only in a child, with the request it is to run."""
    while True:
        received = _receive(control)
        if received is None:
            os._exit(0)
        request, fds = received
        pid = os.fork()
        if pid == 0:
            control.close()
            return request, fds
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        control.send(json.dumps({"status": status}).encode())


def _become(request: dict[str, object], fds: list[int], base_path: list[str]) -> list[str]:
    """Make this child the process the request describes; returns its command."""
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    cwd = str(request["cwd"])
    os.chdir(cwd)
    environment = request["env"]
    command = request["command"]
    assert isinstance(environment, dict) and isinstance(command, list)
    os.environ.clear()
    os.environ.update(environment)
    # As a fresh interpreter has it: ``-m`` puts the working directory first, a script its
    # own folder; then PYTHONPATH.
    first = cwd if command[0] == "-m" else os.path.dirname(os.path.abspath(str(command[0])))
    extra = [entry for entry in environment.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [first, *extra, *base_path]
    importlib.invalidate_caches()
    return [str(part) for part in command]


def _run(command: list[str]) -> int:
    """Run the command; its exit status as the interpreter would give it."""
    try:
        if command[0] == "-m":
            assert command[1] == "roboz.cli", command
            import roboz.cli
            from roboz.cli.app import main

            sys.argv = [os.path.join(os.path.dirname(roboz.cli.__file__), "__main__.py")]
            sys.argv += command[2:]

            return main()
        sys.argv = command
        runpy.run_path(command[0], run_name="__main__")
        return 0
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _exit(code: int) -> None:
    """End as the interpreter ends, less its teardown of every module: in a child that would
    touch (and so copy) each page of the heap it shares with the server."""
    threading._shutdown()  # type: ignore[attr-defined]  # joins the threads that are not daemons
    atexit._run_exitfuncs()  # pyright: ignore[reportPrivateUsage]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as Python exits when it cannot flush standard output
    os._exit(code & 0xFF)


if __name__ == "__main__":
    # The interpreter's own entries, without the server's PYTHONPATH (started with -P, its
    # path does not begin with this script's folder).
    inherited = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    base_path = [entry for entry in sys.path if entry not in inherited]
    _preload()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    channel = socket.socket(fileno=int(sys.argv[1]))
    request, fds = _serve(channel)
    _exit(_run(_become(request, fds, base_path)))
