"""``roboz threads list|show|search|create|send|cancel|fork|pin|unpin|rate|delete --url
http://...``: the thread API of a ``roboz serve`` through :class:`roboz.server.ThreadClient`.
``list``, ``show``, ``export`` and ``delete`` also open a store directly (``--store PATH``,
or ``--url`` of a PostgreSQL database; see ``threads_store``).

Errors the server answers are one line with its code; a refused input (400, 404, 422) exits
2, any other refusal or an unreachable server 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError
from roboz.cli.threads_store import is_server_url, opened_store, threads_of, url_beside

URL_HELP = "The roboz serve to talk to, e.g. http://127.0.0.1:8340."
TOKEN_HELP = "A bearer token (roboz serve tokens create); default: $ROBOZ_TOKEN."

Url = Annotated[str, typer.Option("--url", help=URL_HELP, envvar="ROBOZ_SERVER_URL")]
Token = Annotated[
    str, typer.Option("--token", help=TOKEN_HELP, envvar="ROBOZ_TOKEN", show_default=False)
]
EITHER_HELP = (
    "A roboz serve (http://...), or a PostgreSQL thread store to open directly "
    "(postgresql://... or a conninfo string)."
)
STORE_HELP = "A SQLite thread store to open directly (as its operator: no token)."
EitherUrl = Annotated[
    str | None,
    typer.Option("--url", help=EITHER_HELP, envvar="ROBOZ_SERVER_URL", show_default=False),
]
Store = Annotated[Path | None, typer.Option("--store", help=STORE_HELP, show_default=False)]
Schema = Annotated[str, typer.Option("--schema", help="The PostgreSQL schema of the store.")]
MaybeToken = Annotated[
    str | None,
    typer.Option("--token", help=TOKEN_HELP, envvar="ROBOZ_TOKEN", show_default=False),
]
ThreadArg = Annotated[str, typer.Argument(help="The thread's id.", metavar="THREAD_ID")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of lines.")]


@contextmanager
def _client(url: str, token: str) -> Generator[Any]:
    if not url.lower().startswith(("http://", "https://")):
        raise CliUsageError(f"--url must be an http:// or https:// URL, not {url!r}")
    try:
        import httpx

        from roboz.server.client import ThreadApiError, ThreadClient
    except ImportError as error:
        raise CliError(f"{error}; install roboz[server]") from error
    try:
        with ThreadClient(url, token) as client:
            yield client
    except ThreadApiError as error:
        usage = error.status in (400, 404, 413, 422)
        raise CliError(f"{error.code}: {error.message}", exit_code=2 if usage else 1) from error
    except httpx.TransportError as error:
        raise CliError(f"cannot reach {url}: {error}") from error


def _server(url: str | None, store: Path | None, token: str | None) -> tuple[str, str] | None:
    """The server's URL and token, or None when the command opens a store itself (--store,
    or --url of PostgreSQL). A --store on the line wins over a URL that only came from
    $ROBOZ_SERVER_URL; a server needs a token."""
    url = url_beside(store, url)
    if store is not None or (url is not None and not is_server_url(url)):
        return None
    if url is None:
        raise CliUsageError("give --url (a server or PostgreSQL) or --store PATH (SQLite)")
    if not token:
        raise CliUsageError("a server needs --token (or $ROBOZ_TOKEN)")
    return url, token


def _line(thread: Any) -> str:
    pin = "*" if thread.pinned_at is not None else " "
    return f"{pin} {thread.thread_id}  {thread.status.value:<16} {thread.title or ''}".rstrip()


def _print_page(page: Any, as_json: bool) -> None:
    if as_json:
        threads = [t.model_dump(mode="json") for t in page.threads]
        typer.echo(json.dumps({"threads": threads, "next_page_token": page.next_page_token}))
        return
    for thread in page.threads:
        typer.echo(_line(thread))
    if page.next_page_token:
        typer.echo(f"(more: --page-token {page.next_page_token})", err=True)


def register(app: App) -> None:
    """Add the API commands to ``roboz threads``."""
    command: Callable[..., Any] = app.command

    @command("list")
    def list_threads(  # pyright: ignore[reportUnusedFunction]
        url: EitherUrl = None,
        token: MaybeToken = None,
        store: Store = None,
        schema: Schema = "roboz",
        limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
        page_token: Annotated[str | None, typer.Option("--page-token")] = None,
        pinned: Annotated[bool, typer.Option("--pinned", help="Only your pinned threads.")] = False,
        as_json: Json = False,
    ) -> None:
        """List the threads you may read, newest first (* = pinned by you); from a store,
        every thread."""
        if server := _server(url, store, token):
            with _client(*server) as client:
                page = client.list_threads(limit=limit, page_token=page_token, pinned=pinned)
            _print_page(page, as_json)
            return
        if page_token is not None or pinned:
            raise CliUsageError("--page-token and --pinned are for a server")
        from roboz.threads import ThreadPage

        with opened_store(store, url, schema) as opened:
            threads = opened.list_threads(limit=limit)
        _print_page(ThreadPage(threads, None), as_json)

    @command("search")
    def search_threads(  # pyright: ignore[reportUnusedFunction]
        query: Annotated[str, typer.Argument(help="Text to find in titles and messages.")],
        url: Url,
        token: Token,
        limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
        page_token: Annotated[str | None, typer.Option("--page-token")] = None,
        as_json: Json = False,
    ) -> None:
        """Search the titles and message text of the threads you may read."""
        with _client(url, token) as client:
            page = client.search_threads(query, limit=limit, page_token=page_token)
        _print_page(page, as_json)

    @command("show")
    def show_thread(  # pyright: ignore[reportUnusedFunction]
        thread_id: ThreadArg,
        url: EitherUrl = None,
        token: MaybeToken = None,
        store: Store = None,
        schema: Schema = "roboz",
    ) -> None:
        """Print a thread as JSON, as the API reads it."""
        if server := _server(url, store, token):
            with _client(*server) as client:
                typer.echo(client.get_thread(thread_id).model_dump_json(indent=2))
            return
        with opened_store(store, url, schema) as opened:
            for thread in threads_of(opened, [thread_id]):
                typer.echo(thread.model_dump_json(indent=2))

    @command("export")
    def export(  # pyright: ignore[reportUnusedFunction]
        thread_ids: Annotated[
            list[str] | None,
            typer.Argument(
                help="The threads (default: all).", metavar="[THREAD_ID]...", show_default=False
            ),
        ] = None,
        url: EitherUrl = None,
        token: MaybeToken = None,
        store: Store = None,
        schema: Schema = "roboz",
    ) -> None:
        """Print threads as JSON lines (one whole thread per line, as the API reads it): a
        backup, or a copy for another tool."""
        ids = list(thread_ids or [])
        if server := _server(url, store, token):
            with _client(*server) as client:
                if not ids:
                    page_token = None
                    while True:
                        page = client.list_threads(limit=1000, page_token=page_token)
                        ids += [thread.thread_id for thread in page.threads]
                        page_token = page.next_page_token
                        if not page_token:
                            break
                for thread_id in ids:
                    typer.echo(client.get_thread(thread_id).model_dump_json())
            return
        with opened_store(store, url, schema) as opened:
            for thread in threads_of(opened, ids):
                typer.echo(thread.model_dump_json())

    @command("create")
    def create_thread(  # pyright: ignore[reportUnusedFunction]
        url: Url,
        token: Token,
        title: Annotated[str | None, typer.Option("--title")] = None,
        org: Annotated[bool, typer.Option("--org", help="Visible to your organization.")] = False,
        agent: Annotated[str | None, typer.Option("--agent", help="The agent to answer.")] = None,
    ) -> None:
        """Create a thread and print its id."""
        from roboz.threads import ThreadVisibility

        visibility = ThreadVisibility.ORG if org else ThreadVisibility.PRIVATE
        with _client(url, token) as client:
            record = client.create_thread(title=title, visibility=visibility, agent=agent)
        typer.echo(record.thread_id)

    @command("send")
    def send(  # pyright: ignore[reportUnusedFunction]
        thread_id: ThreadArg,
        text: Annotated[str, typer.Argument(help="Your message.")],
        url: Url,
        token: Token,
    ) -> None:
        """Send a message and print the reply's text as it streams in."""
        from roboz.threads import AgentErrorContent, AgentRole, AgentTextContent

        with _client(url, token) as client:
            before = client.get_thread(thread_id)
            client.send_message(thread_id, text)
            shown: dict[int, int] = {}
            last = before
            for last in client.stream_deltas(thread_id, record=before):
                for index in range(len(before.messages), len(last.messages)):
                    message = last.messages[index]
                    if message.role is AgentRole.USER:
                        continue
                    blocks = message.content[shown.get(index, 0) :]
                    shown[index] = len(message.content)
                    for block in blocks:
                        if (
                            isinstance(block, AgentTextContent)
                            and message.role is AgentRole.ASSISTANT
                        ):
                            typer.echo(block.text, nl=False)
                        elif isinstance(block, AgentErrorContent):
                            typer.echo(f"\n[error] {block.error_message}", err=True)
        typer.echo("")
        typer.echo(f"[{last.status.value}]", err=True)

    @command("cancel")
    def cancel(thread_id: ThreadArg, url: Url, token: Token) -> None:  # pyright: ignore[reportUnusedFunction]
        """Cancel the thread's running turn."""
        with _client(url, token) as client:
            stopped = client.cancel(thread_id)
        typer.echo("cancelled" if stopped else "cancel passed to the server running it")

    @command("fork")
    def fork(  # pyright: ignore[reportUnusedFunction]
        thread_id: ThreadArg,
        url: Url,
        token: Token,
        message: Annotated[int, typer.Option("--message", help="Last message copied.", min=0)],
        title: Annotated[str | None, typer.Option("--title")] = None,
    ) -> None:
        """Copy a thread up to a message into a new thread of yours; print its id."""
        with _client(url, token) as client:
            typer.echo(client.fork_thread(thread_id, message, title=title).thread_id)

    @command("pin")
    def pin(thread_id: ThreadArg, url: Url, token: Token) -> None:  # pyright: ignore[reportUnusedFunction]
        """Pin a thread (for you alone)."""
        with _client(url, token) as client:
            client.set_pinned(thread_id, True)

    @command("unpin")
    def unpin(thread_id: ThreadArg, url: Url, token: Token) -> None:  # pyright: ignore[reportUnusedFunction]
        """Unpin a thread."""
        with _client(url, token) as client:
            client.set_pinned(thread_id, False)

    @command("rate")
    def rate(  # pyright: ignore[reportUnusedFunction]
        thread_id: ThreadArg,
        rating: Annotated[str, typer.Argument(help="positive or negative.")],
        url: Url,
        token: Token,
        message: Annotated[int | None, typer.Option("--message", min=0)] = None,
        comment: Annotated[str | None, typer.Option("--comment")] = None,
    ) -> None:
        """Rate a thread, or one message of it."""
        from roboz.threads import ThreadRating

        try:
            verdict = ThreadRating(rating)
        except ValueError:
            raise CliUsageError(f"rating must be positive or negative, not {rating!r}") from None
        with _client(url, token) as client:
            client.rate_thread(thread_id, verdict, message_sequence_num=message, comment=comment)

    @command("delete")
    def delete(  # pyright: ignore[reportUnusedFunction]
        thread_id: ThreadArg,
        url: EitherUrl = None,
        token: MaybeToken = None,
        store: Store = None,
        schema: Schema = "roboz",
    ) -> None:
        """Delete a thread (yours, or as an admin; from a store, any thread no run holds)."""
        if server := _server(url, store, token):
            with _client(*server) as client:
                client.delete_thread(thread_id)
            return
        with opened_store(store, url, schema, write=True) as opened:
            opened.delete_thread(thread_id)
        typer.echo(f"deleted {thread_id}")
