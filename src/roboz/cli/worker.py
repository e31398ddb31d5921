"""``roboz worker``: serve an app's durable runs from this process until SIGTERM or SIGINT.

The app is a :class:`roboz.durable.DurableRuns` named ``module:attr``; the worker launches it
under a stable executor id, beats in PostgreSQL and resumes the runs of workers that died.
"""

from __future__ import annotations

import faulthandler
import importlib
import logging
import os
import signal
import sys
import threading
from typing import Annotated, Any

import typer

from roboz.cli.errors import CliError, CliUsageError

APP_HELP = (
    "The durable runs to serve, as module:attr, where attr is a roboz.durable.DurableRuns "
    "(e.g. myproject.agents:runs). The module is imported from the current directory too."
)
URL_HELP = (
    "The PostgreSQL database of the runs and of the workers' heartbeats. Defaults to the URL "
    "the DurableRuns was built with; if given, it must name the same database."
)
QUEUE_HELP = "The queue to serve. Defaults to the DurableRuns' queue; if given, it must match."
NAME_HELP = (
    "This worker's name on its host (0, 1, 2, ... when a host runs several); the executor id "
    "is HOST:QUEUE:NAME, so a worker restarted under the same name recovers its own runs."
)
EXECUTOR_HELP = (
    "The executor id itself, instead of HOST:QUEUE:NAME. It must be unique among live "
    "workers (a second live worker with it is refused) and stable across restarts."
)
CONCURRENCY_HELP = (
    "At most this many runs at once on each worker of the queue (default: the DurableRuns'). "
    "DBOS keeps queue settings in the database: the worker started last sets it for all."
)
INTERVAL_HELP = "Seconds between heartbeats."
STALE_HELP = (
    "Seconds of silence after which a worker whose database lock is free counts as dead even "
    "if no live worker saw its session end (it died while PostgreSQL restarted); a worker "
    "whose session is seen ending counts as dead a second later. Use the same value on every "
    "worker of a queue."
)
SCHEMA_HELP = "The PostgreSQL schema of the workers' heartbeat table."


def load_app(spec: str) -> Any:
    """The object ``module:attr`` names; one line saying what is wrong if it cannot be had."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(f"--app must be module:attr, not {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")  # as `python -m` would: the app lives in the user's project
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CliUsageError(f"--app {spec}: cannot import {module_name}: {error}") from error
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliUsageError(f"--app {spec}: {module_name} has no {attr}") from None
    missing = [
        name
        for name in ("url", "queue", "application_version", "launch", "shutdown")
        if not hasattr(target, name)
    ]
    if missing:
        raise CliUsageError(
            f"--app {spec} is a {type(target).__name__}, not a DurableRuns "
            f"(it has no {', '.join(missing)})"
        )
    return target


def worker(
    app: Annotated[str, typer.Option("--app", help=APP_HELP, metavar="MODULE:ATTR")],
    url: Annotated[
        str | None, typer.Option("--url", help=URL_HELP, envvar="ROBOZ_DURABLE_URL", metavar="URL")
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", help=QUEUE_HELP, metavar="NAME")] = None,
    name: Annotated[str, typer.Option("--name", help=NAME_HELP, metavar="NAME")] = "0",
    executor_id: Annotated[
        str | None, typer.Option("--executor-id", help=EXECUTOR_HELP, metavar="ID")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", help=CONCURRENCY_HELP, min=1, metavar="N")
    ] = None,
    heartbeat_interval: Annotated[
        float, typer.Option("--heartbeat-interval", help=INTERVAL_HELP, min=0.05, metavar="SECONDS")
    ] = 5.0,
    stale_after: Annotated[
        float, typer.Option("--stale-after", help=STALE_HELP, metavar="SECONDS")
    ] = 30.0,
    schema: Annotated[str, typer.Option("--schema", help=SCHEMA_HELP, metavar="SCHEMA")] = "roboz",
) -> int:
    """Serve durable runs: launch them under a stable executor id and a pinned application
    version, heartbeat in PostgreSQL, resume the runs of dead workers; stop on SIGTERM or
    SIGINT (Ctrl-C), leaving unfinished runs to the other workers."""
    # Before DBOS is imported (most of a second): a usage error is said at once.
    if stale_after <= heartbeat_interval * 2:
        raise CliUsageError(
            f"--stale-after ({stale_after:g} s) must exceed twice --heartbeat-interval "
            f"({heartbeat_interval:g} s), or a busy worker could be taken for dead"
        )
    try:
        from roboz.durable.errors import DurableError
        from roboz.durable.recovery import describe
        from roboz.durable.worker import Worker, default_executor_id
    except ImportError as error:  # pragma: no cover - dbos and psycopg come with the extra
        raise CliError(f"{error}; install roboz[durable]") from error
    runs = load_app(app)
    try:
        if url is not None and describe(url) != describe(runs.url):
            raise CliUsageError(f"--url names {describe(url)} but {app} uses {describe(runs.url)}")
    except DurableError as error:
        raise CliUsageError(str(error)) from error
    if queue is not None and queue != runs.queue:
        raise CliUsageError(f"--queue is {queue!r} but {app} serves queue {runs.queue!r}")
    if concurrency is not None:
        runs.worker_concurrency = concurrency
    # `kill -USR1 PID` prints every thread's stack: what a stuck worker is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        serving = Worker(
            runs,
            executor_id=executor_id or default_executor_id(runs.queue, name),
            schema=schema,
            interval_s=heartbeat_interval,
            stale_after_s=stale_after,
        )
        code = serving.serve()
    except ValueError as error:
        raise CliUsageError(str(error)) from error
    except DurableError as error:
        raise CliError(str(error)) from error
    _leave(code)
    return code


def _leave(code: int) -> None:
    """Exit now if steps are still running in threads the shutdown did not wait for.

    Their runs are marked as left and other workers resume them from their last recorded
    step, as after a crash (which is why effects carry idempotency keys); waiting for the
    threads would only hold the process, and the interpreter would wait for them at exit.
    """
    busy = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if busy:
        logging.getLogger("roboz.durable.worker").info(
            "exiting with %d thread(s) still running; steps in flight resume elsewhere",
            len(busy),
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
