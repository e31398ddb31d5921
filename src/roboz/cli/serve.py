"""``roboz serve``: the thread API of an app's agents over HTTP, and its bearer tokens.

``roboz serve --app module:attr`` serves the agent (or list or dict of agents) ``attr``
names over a thread store (a SQLite file, or a PostgreSQL database shared by many servers).
``roboz serve tokens create --user U --org O`` prints a new token (only its hash is stored);
``tokens list`` and ``tokens revoke`` manage them. Needs ``roboz[server]``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError
from roboz.cli.threads_store import url_beside

app = App(
    help="Serve agents' threads over HTTP (roboz[server]): the thread API, live deltas, tokens.",
    invoke_without_command=True,
)
tokens_app = App(help="Create, list and revoke the bearer tokens of roboz serve.")
app.add_typer(tokens_app, name="tokens")

APP_HELP = (
    "The agents to serve, as module:attr, where attr is an Agent, a list of Agents or a dict "
    "of name to Agent (the first is the default for new threads). The module is imported "
    "from the current directory too."
)
STORE_HELP = "The SQLite thread store (created if missing). Default: roboz-threads.db."
URL_HELP = (
    "A PostgreSQL thread store instead (libpq URL or conninfo, schema made by roboz threads "
    "migrate); any number of servers may share it."
)
SCHEMA_HELP = "The PostgreSQL schema of the thread store."
DURABLE_HELP = (
    "Run no turn here: queue each turn for the roboz worker processes of --queue over --url "
    "(its database, with DBOS's tables: roboz threads migrate), which run them durably. "
    "--app may then name the workers' DurableRuns (its agents, queue, version and URL)."
)
QUEUE_HELP = "With --durable: the workers' queue (default: the DurableRuns', else roboz)."
GRACE_HELP = "Seconds running turns get to finish at shutdown before they are cancelled."


StoreOption = Annotated[Path | None, typer.Option("--store", help=STORE_HELP, metavar="PATH")]
UrlOption = Annotated[
    str | None, typer.Option("--url", help=URL_HELP, envvar="ROBOZ_THREADS_URL", metavar="URL")
]
SchemaOption = Annotated[str, typer.Option("--schema", help=SCHEMA_HELP, metavar="SCHEMA")]


def open_store(store: Path | None, url: str | None, schema: str) -> Any:
    """The thread store the options name; one line saying what is wrong if it cannot open."""
    from roboz.threads import SchemaVersionError, ThreadStoreError

    url = url_beside(store, url, "ROBOZ_THREADS_URL")
    try:
        if url is not None:
            from roboz.threads.postgres import PostgresThreadStore

            return PostgresThreadStore(url, schema=schema)
        from roboz.threads import SQLiteThreadStore

        return SQLiteThreadStore(store or Path("roboz-threads.db"))
    except (ThreadStoreError, SchemaVersionError, ValueError) as error:
        raise CliUsageError(str(error)) from error


def load_agents(spec: str) -> Any:
    """The agents ``module:attr`` names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(f"--app must be module:attr, not {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
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
    return target


def _server_imports() -> Any:
    try:
        from roboz.server import app as server_app
        from roboz.server import serve as server_serve
    except ImportError as error:
        raise CliError(f"{error}; install roboz[server]") from error
    return server_app, server_serve


@app.callback()
def serve(
    ctx: typer.Context,
    app_spec: Annotated[
        str | None, typer.Option("--app", help=APP_HELP, metavar="MODULE:ATTR")
    ] = None,
    store: StoreOption = None,
    url: UrlOption = None,
    schema: SchemaOption = "roboz",
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on.", metavar="HOST")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port", help="The port (0: any free port).", min=0, max=65535, metavar="PORT"
        ),
    ] = 8340,
    grace: Annotated[
        float, typer.Option("--grace", help=GRACE_HELP, min=0, metavar="SECONDS")
    ] = 30.0,
    max_body: Annotated[
        int,
        typer.Option("--max-body", help="Largest request body in bytes.", min=1024, metavar="N"),
    ] = 1024 * 1024,
    keepalive: Annotated[
        float,
        typer.Option(
            "--keepalive",
            help="Seconds between keepalive comments on idle streams.",
            min=0.1,
            metavar="SECONDS",
        ),
    ] = 15.0,
    log_level: Annotated[
        str, typer.Option("--log-level", help="debug, info, warning or error.", metavar="LEVEL")
    ] = "info",
    durable: Annotated[bool, typer.Option("--durable", help=DURABLE_HELP)] = False,
    queue: Annotated[str | None, typer.Option("--queue", help=QUEUE_HELP, metavar="NAME")] = None,
) -> None:
    """Serve the thread API of --app's agents until SIGTERM or SIGINT (running turns get
    --grace seconds, then are cancelled and recorded). The OpenAPI schema is at
    /openapi.json. Create tokens first: roboz serve tokens create --user U --org O."""
    if ctx.invoked_subcommand is not None:
        return
    if app_spec is None:
        raise CliUsageError("roboz serve needs --app MODULE:ATTR (see 'roboz serve --help')")
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise CliUsageError(f"--log-level must be debug, info, warning or error, not {log_level!r}")
    url = url_beside(store, url, "ROBOZ_THREADS_URL")
    # The server stack (FastAPI, uvicorn) takes most of a second to import: a usage error
    # is found and reported before it.
    agents = load_agents(app_spec)
    server_app, server_serve = _server_imports()
    runs = agents if _is_durable_runs(agents) else None
    if runs is not None:
        if not durable:
            raise CliUsageError(
                f"--app {app_spec} is a DurableRuns: serve it with --durable (its turns run on "
                "roboz worker), or name its agents instead"
            )
        agents = runs.agents
        url = url or runs.url
    try:
        server_app.agents_by_name(agents)
    except (TypeError, ValueError) as error:
        raise CliUsageError(f"--app {app_spec}: {error}") from error
    if durable and (store is not None or url is None):
        raise CliUsageError("--durable needs --url, the PostgreSQL database of the workers")
    if queue is not None and not durable:
        raise CliUsageError("--queue is for --durable")
    opened = open_store(store, url, schema)
    client = None
    try:
        if durable:
            assert url is not None
            client = _durable_client(url, queue, runs, schema)
        application = server_app.create_app(
            agents,
            opened,
            keepalive_s=keepalive,
            max_body_bytes=max_body,
            shutdown_grace_s=grace,
            durable=client,
        )
    except BaseException as error:
        if client is not None:
            client.close()
        opened.close()
        if isinstance(error, TypeError | ValueError):
            raise CliUsageError(f"--app {app_spec}: {error}") from error
        raise
    try:
        sock = server_serve.bind(host, port)
    except OSError as error:
        opened.close()
        raise CliError(f"cannot listen on {host}:{port}: {error.strerror or error}") from error
    try:
        server_serve.run(application, sock, grace_s=grace, log_level=log_level.lower())
    finally:
        opened.close()


def _is_durable_runs(target: Any) -> bool:
    return all(hasattr(target, name) for name in ("agents", "queue", "url", "launch"))


def _durable_client(url: str, queue: str | None, runs: Any, schema: str) -> Any:
    """The DurableClient of the workers' queue; one line saying what is wrong otherwise."""
    try:
        from roboz.durable import DurableClient, DurableError
    except ImportError as error:
        raise CliError(f"{error}; install roboz[durable]") from error
    if runs is not None and queue is not None and queue != runs.queue:
        raise CliUsageError(f"--queue is {queue!r} but the DurableRuns serve {runs.queue!r}")
    try:
        return DurableClient(
            url,
            queue=queue or (runs.queue if runs is not None else "roboz"),
            application_version=None if runs is None else runs.application_version,
            schema=schema,
        )
    except DurableError as error:
        raise CliUsageError(str(error)) from error


@tokens_app.command("create")
def create_token(
    user: Annotated[str, typer.Option("--user", help="The user the token acts as.")],
    org: Annotated[str, typer.Option("--org", help="The user's organization.")],
    admin: Annotated[
        bool,
        typer.Option("--admin", help="An admin of the organization (reads its PRIVATE threads)."),
    ] = False,
    label: Annotated[str | None, typer.Option("--label", help="A note on what it is for.")] = None,
    store: StoreOption = None,
    url: UrlOption = None,
    schema: SchemaOption = "roboz",
) -> None:
    """Create a token and print it (shown this once; only a hash of it is stored)."""
    from roboz.threads import Caller

    try:
        caller = Caller(user, org, admin=admin)
    except ValueError as error:
        raise CliUsageError(str(error)) from error
    opened = open_store(store, url, schema)
    try:
        token_id, token = opened.create_api_token(caller, label=label)
    finally:
        opened.close()
    typer.echo(token)
    typer.echo(f"token {token_id} for {user} of {org}{' (admin)' if admin else ''}", err=True)


@tokens_app.command("list")
def list_tokens(
    store: StoreOption = None, url: UrlOption = None, schema: SchemaOption = "roboz"
) -> None:
    """List tokens (ids, never secrets), revoked ones marked."""
    opened = open_store(store, url, schema)
    try:
        infos = opened.list_api_tokens()
    finally:
        opened.close()
    for info in infos:
        state = f"revoked {info.revoked:%Y-%m-%d %H:%M}" if info.revoked else "active"
        who = f"{info.user_id}@{info.org_id}{' admin' if info.admin else ''}"
        typer.echo(f"{info.token_id}  {who}  {state}  {info.label or ''}".rstrip())


@tokens_app.command("revoke")
def revoke_token(
    token_id: Annotated[str, typer.Argument(help="The token's id (or the token itself).")],
    store: StoreOption = None,
    url: UrlOption = None,
    schema: SchemaOption = "roboz",
) -> None:
    """Revoke a token: every server over the store refuses it from its next request. Only
    its id is ever printed, even when the whole token was given."""
    from roboz.threads import api_token_id

    found = api_token_id(token_id.strip())
    if found is None:  # not echoed: it may be a mistyped secret
        raise CliUsageError(
            "not a token id (16 hex digits, as roboz serve tokens list shows) nor a token"
        )
    opened = open_store(store, url, schema)
    try:
        revoked = opened.revoke_api_token(found)
    finally:
        opened.close()
    if not revoked:
        raise CliUsageError(f"no active token {found}")
    typer.echo(f"revoked {found}")
