"""The fork server of ``tests/forked.py``: imports the library and what its commands import,
then forks a child per request that runs ``-m MODULE ARGS`` or ``SCRIPT ARGS`` as a fresh
interpreter would.

It runs as a script (not ``tests.forkserver``) so that no package of this repository is
imported into the children: a test's project may have a ``tests`` package of its own. Its
socket (``SOCK_SEQPACKET``, from the worker) carries JSON requests with four descriptors each
(a socket for the answers about that child, then its stdin, stdout and stderr); see
``_serve``. The server ends when that socket closes (its worker ended), killing the children
still running.
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
import selectors
import signal
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
    message, ancillary, _, _ = control.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
    if not message:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return json.loads(message), list(fds)


def _serve(control: socket.socket) -> tuple[dict[str, object], list[int]]:
    """Until the worker goes: returns only in a child, with its request and stdio.

    A request brings four descriptors: a socket for the answers about this child (its pid,
    then its wait status), then its stdin, stdout and stderr. Children run side by side (a
    server, a worker and a command at once); a pidfd per child says when to reap it."""
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    children: dict[int, tuple[int, socket.socket]] = {}  # by pidfd: the pid, its answers
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                received = _receive(control)
                if received is None:  # the worker ended: so do the children it left
                    for pid, _ in children.values():
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                            os.waitpid(pid, 0)
                    os._exit(0)
                request, fds = received
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    control.close()
                    for pidfd, (_, answers) in children.items():
                        os.close(pidfd)
                        answers.close()
                    os.close(fds[0])
                    return request, fds[1:]
                for fd in fds[1:]:
                    os.close(fd)
                answers = socket.socket(fileno=fds[0])
                answers.send(json.dumps({"pid": pid}).encode())
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, answers)
                selector.register(pidfd, selectors.EVENT_READ)
            else:
                pidfd = key.fd
                selector.unregister(pidfd)
                pid, answers = children.pop(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):  # the caller may have gone
                    answers.send(json.dumps({"status": status}).encode())
                answers.close()


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
        if command[:2] == ["-m", "roboz.cli"]:
            import roboz.cli
            from roboz.cli.app import main

            sys.argv = [os.path.join(os.path.dirname(roboz.cli.__file__), "__main__.py")]
            sys.argv += command[2:]
            return main()
        if command[0] == "-m":
            sys.argv = ["-m", *command[2:]]  # run_module puts the module's file first
            runpy.run_module(command[1], run_name="__main__", alter_sys=True)
            return 0
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
