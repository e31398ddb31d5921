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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from roboz.server import ThreadApiError, ThreadClient
from roboz.threads import (
    AgentMessageStatus,
    AgentThreadStatus,
    Caller,
    SQLiteThreadStore,
    ThreadVisibility,
)
from tests import forked
from tests.cli.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]


def roboz(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return run_cli(*args, cwd=cwd, env={"PYTHONPATH": str(REPO), **(env or {})})


class ServeProcess:
    def __init__(self, args: list[str], cwd: Path) -> None:
        self.process = forked.popen(
            ["-m", "roboz.cli", "serve", "--port", "0", *args],
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


def test_commits_of_another_process_reach_the_very_next_cached_get_under_load(
    tmp_path: Path, processes: list[ServeProcess]
) -> None:
    """``GET`` thread answered from the cache, with the store's change stamp read once per
    round of the server's loop, while six clients keep asking: a title changed and then a
    token revoked by another process are seen by every request sent after its commits
    returned, however many requests the server is busy with."""
    store_path = tmp_path / "threads.db"
    with SQLiteThreadStore(store_path) as store:
        bob, cat = Caller("bob", "acme"), Caller("cat", "acme")
        bob_token = store.create_api_token(bob)[1]
        cat_token = store.create_api_token(cat)[1]
        made = store.for_caller(bob).create_thread(title="before", visibility=ThreadVisibility.ORG)
        thread_id = made.thread_id
    served = ServeProcess(
        ["--app", "tests.server.agents:helper", "--store", str(store_path)], tmp_path
    )
    processes.append(served)
    url = f"{served.url}/v1/ai/threads/{thread_id}"
    seen: list[tuple[float, float, str, int, str]] = []  # (sent, answered, who, status, title)
    stop = threading.Event()

    def ask(who: str, token: str) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            while not stop.is_set():
                sent = time.monotonic()
                answer = client.get(url)
                title = answer.json().get("title", "") if answer.status_code == 200 else ""
                seen.append((sent, time.monotonic(), who, answer.status_code, title))

    askers = [
        threading.Thread(target=ask, args=(who, token), daemon=True)
        for who, token in [("bob", bob_token), ("cat", cat_token)] * 3
    ]
    for asker in askers:
        asker.start()
    time.sleep(0.5)
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(store_path), thread_id, bob_token],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ) as writer:
        assert writer.stdin is not None and writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"

        def commit(what: str) -> tuple[float, float]:
            """(when asked, when the other process said its commit returned)"""
            asked = time.monotonic()
            writer.stdin.write(what + "\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "done\n"
            return asked, time.monotonic()

        retitling, retitled = commit("retitle")
        time.sleep(0.5)
        revoking, revoked_at = commit("revoke")
        time.sleep(0.5)
        writer.stdin.close()
        assert writer.wait(60) == 0
    stop.set()
    for asker in askers:
        asker.join(30)

    # Each answer must be the state at some moment between the request's sending and its
    # answer: before a write was asked for, the old state; once the writer said it had
    # committed, the new one; either while the two overlap.
    def states(sent: float, answered: float, start: float, end: float, old: Any, new: Any) -> Any:
        return {old} if answered < start else {new} if sent > end else {old, new}

    wrong = []
    for sent, answered, who, status, title in seen:
        titles = states(sent, answered, retitling, retitled, "before", "after")
        statuses = {200} if who == "cat" else states(sent, answered, revoking, revoked_at, 200, 401)
        want = {(200, t) for t in titles} if 200 in statuses else set[tuple[int, str]]()
        if 401 in statuses:
            want.add((401, ""))
        if (status, title) not in want:
            wrong.append(
                (who, round(sent - retitling, 3), round(answered - retitling, 3), status, title)
            )
    assert not wrong, wrong[:10]
    late = {who for sent, _, who, _, _ in seen if sent > revoked_at}
    assert late == {"bob", "cat"} and min(sent for sent, *_ in seen) < retitling
    assert served.stop() == 0


_WRITER = """
import sys
from roboz.threads import SQLiteThreadStore, api_token_id
with SQLiteThreadStore(sys.argv[1]) as store:
    print("ready", flush=True)
    for line in sys.stdin:
        if line == "retitle\\n":
            store.set_title(sys.argv[2], "after")
        else:
            assert store.revoke_api_token(api_token_id(sys.argv[3]))
        print("done", flush=True)
"""
"""Another process writing to the store when told, saying when each commit returned (as
``roboz serve tokens revoke`` does, without the seconds its exit takes)."""
