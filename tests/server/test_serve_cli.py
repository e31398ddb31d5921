"""``roboz serve`` as a user runs it: real processes on loopback ports of their own, tokens
made and revoked with the CLI, ``roboz threads ... --url``, SIGTERM during a turn, and two
servers over one PostgreSQL store passing deltas and cancels to each other."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from roboz.server import ThreadApiError, ThreadClient
from roboz.threads import AgentMessageStatus, AgentThreadStatus, SQLiteThreadStore
from tests.cli.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]


def roboz(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return run_cli(*args, cwd=cwd, env={"PYTHONPATH": str(REPO), **(env or {})})


class ServeProcess:
    def __init__(self, args: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "roboz.cli", "serve", "--port", "0", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise AssertionError("roboz serve did not start:\n" + "".join(self.lines))
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(60)
        self._reader.join(5)
        return code


@pytest.fixture
def processes() -> Iterator[list[ServeProcess]]:
    started: list[ServeProcess] = []
    yield started
    for process in started:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait(30)


def test_serve_tokens_and_threads_commands_end_to_end(
    tmp_path: Path, processes: list[ServeProcess]
) -> None:
    store = str(tmp_path / "threads.db")
    made = roboz(
        "serve",
        "tokens",
        "create",
        "--user",
        "bob",
        "--org",
        "acme",
        "--store",
        store,
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("rbz_") and "for bob of acme" in made.stderr
    served = ServeProcess(
        ["--app", "tests.server.agents:helper", "--store", store, "--keepalive", "1"], tmp_path
    )
    processes.append(served)
    common = ["--url", served.url, "--token", token]
    created = roboz("threads", "create", "--title", "From the CLI", *common, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    thread_id = created.stdout.strip()
    sent = roboz("threads", "send", thread_id, "hello from a shell 4", *common, cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    assert "You said 'hello from a shell 4'. word0 word1 word2 word3" in sent.stdout
    assert "[user_turn]" in sent.stderr
    assert roboz("threads", "pin", thread_id, *common, cwd=tmp_path).returncode == 0
    listed = roboz("threads", "list", *common, cwd=tmp_path)
    assert listed.stdout.splitlines() == [f"* {thread_id}  user_turn        From the CLI"]
    found = roboz("threads", "search", "SHELL", "--json", *common, cwd=tmp_path)
    assert '"thread_id": "' + thread_id in found.stdout.replace('":"', '": "')
    missing = roboz("threads", "show", "th_nope", *common, cwd=tmp_path)
    assert missing.returncode == 2 and "thread_not_found" in missing.stderr
    bad_url = roboz("threads", "list", "--url", "ftp://x", "--token", token, cwd=tmp_path)
    assert bad_url.returncode == 2 and "http://" in bad_url.stderr

    listed_tokens = roboz("serve", "tokens", "list", "--store", store, cwd=tmp_path)
    token_id = token.split("_")[1]
    assert f"{token_id}  bob@acme  active" in listed_tokens.stdout
    assert token.split("_", 2)[2] not in listed_tokens.stdout
    revoked = roboz("serve", "tokens", "revoke", token_id, "--store", store, cwd=tmp_path)
    assert revoked.returncode == 0
    refused = roboz("threads", "list", *common, cwd=tmp_path)
    assert refused.returncode == 1 and "unauthorized" in refused.stderr
    assert served.stop() == 0
    assert any(
        '"path": "/v1/ai/threads"' in line and '"user": "bob"' in line for line in served.lines
    )


def test_revoking_by_the_whole_token_never_prints_its_secret(tmp_path: Path) -> None:
    store = str(tmp_path / "threads.db")
    made = roboz(
        "serve",
        "tokens",
        "create",
        "--user",
        "bob",
        "--org",
        "acme",
        "--store",
        store,
        cwd=tmp_path,
    )
    token = made.stdout.strip()
    token_id, secret = token.split("_", 2)[1:]
    revoked = roboz("serve", "tokens", "revoke", token, "--store", store, cwd=tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.strip() == f"revoked {token_id}"
    again = roboz("serve", "tokens", "revoke", token, "--store", store, cwd=tmp_path)
    assert again.returncode == 2 and f"no active token {token_id}" in again.stderr
    # A mistyped secret (or anything that is neither an id nor a token) is not echoed either.
    typo = token[:-1] + "!"
    mistyped = roboz("serve", "tokens", "revoke", typo, "--store", store, cwd=tmp_path)
    assert mistyped.returncode == 2 and "16 hex digits" in mistyped.stderr
    for done in (revoked, again, mistyped):
        assert secret not in done.stdout + done.stderr
        assert secret[:-1] not in done.stdout + done.stderr
    opened = SQLiteThreadStore(Path(store))
    try:
        assert opened.verify_api_token(token) is None
    finally:
        opened.close()


def test_serve_refuses_bad_options_with_usage_errors(tmp_path: Path) -> None:
    assert roboz("serve", "--store", "x.db", cwd=tmp_path).returncode == 2
    for args, words in (
        (["--app", "nope"], "module:attr"),
        (["--app", "no_such_module:x"], "cannot import"),
        (["--app", "tests.server.agents:nothing"], "has no nothing"),
        (["--app", "tests.server.agents:reply"], "not a roboz Agent"),
        (["--app", "tests.server.agents:helper", "--store", "a.db", "--url", "host=x"], "not both"),
        (["--app", "tests.server.agents:helper", "--log-level", "loud"], "--log-level"),
    ):
        done = roboz("serve", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr and done.stderr.count("\n") == 1
    bad = roboz("serve", "tokens", "create", "--user", "bob smith", "--org", "a", cwd=tmp_path)
    assert bad.returncode == 2 and "user id" in bad.stderr
    assert not (tmp_path / "roboz-threads.db").exists()


def test_sigterm_lets_a_running_turn_finish_or_records_its_cancellation(
    tmp_path: Path, processes: list[ServeProcess]
) -> None:
    store_path = tmp_path / "threads.db"
    with SQLiteThreadStore(store_path) as store:
        from roboz.threads import Caller

        _, token = store.create_api_token(Caller("bob", "acme"))
    served = ServeProcess(
        ["--app", "tests.server.agents:slow", "--store", str(store_path), "--grace", "0.5"],
        tmp_path,
    )
    processes.append(served)
    with ThreadClient(served.url, token) as bob:
        thread = bob.create_thread()
        bob.send_message(thread.thread_id, "a very long answer 400")
        stream = bob.stream_deltas(thread.thread_id, record=thread, max_reconnects=0)
        next(stream)
        assert served.stop() == 0  # SIGTERM: the stream ends, the turn is cancelled
        with pytest.raises((httpx.TransportError, ThreadApiError)):
            list(stream)
    with SQLiteThreadStore(store_path) as store:
        final = store.get_thread(thread.thread_id)
    assert final.status is AgentThreadStatus.USER_TURN
    assert final.messages[0].content[0].text == "a very long answer 400"  # type: ignore[union-attr]
    assert final.messages[-1].status is AgentMessageStatus.CANCELLED
    assert final.messages[-1].content[0].model_dump()["error_code"] == "cancelled"
    assert any("cancelling 1 turn" in line for line in served.lines)


def test_two_servers_over_one_postgres_store_share_deltas_and_cancels(
    tmp_path: Path, processes: list[ServeProcess], postgres_cluster: Any
) -> None:
    from roboz.threads import Caller
    from roboz.threads.postgres import PostgresThreadStore, migrate_database

    schema = postgres_cluster.new_schema()
    migrate_database(postgres_cluster.url, schema=schema)
    with PostgresThreadStore(postgres_cluster.url, schema=schema) as store:
        _, token = store.create_api_token(Caller("bob", "acme"))
    args = ["--url", postgres_cluster.url, "--schema", schema, "--keepalive", "60"]
    one = ServeProcess(["--app", "tests.server.agents:slow", *args], tmp_path)
    two = ServeProcess(["--app", "tests.server.agents:slow", *args], tmp_path)
    processes += [one, two]
    with ThreadClient(one.url, token) as first, ThreadClient(two.url, token) as second:
        thread = first.create_thread()
        first.send_message(thread.thread_id, "from server one 30")  # runs on one
        # A stream client of the other server sees every delta (keepalive 60 s: no polling).
        grown = list(second.stream_deltas(thread.thread_id, record=thread))
        assert len(grown) > 5
        assert grown[-1].model_dump() == first.get_thread(thread.thread_id).model_dump()

        first.send_message(thread.thread_id, "again, and long 400")
        follow = second.stream_deltas(thread.thread_id)
        next(follow)
        assert second.cancel(thread.thread_id) is False  # passed on to the server running it
        *_, last = follow
    assert last.status is AgentThreadStatus.USER_TURN
    assert last.messages[-1].status is AgentMessageStatus.CANCELLED
    assert one.stop() == 0 and two.stop() == 0
