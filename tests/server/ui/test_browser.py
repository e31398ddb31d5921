"""The web UI in real headless Chromium against a real server: a user creates a thread, sends
messages and watches replies stream in, answers a client tool in the page, sees the goal
achieved and the tasks done, every content block kind rendered, cancels a turn, reloads to
the same thread; another user of the org sees the ORG thread and not the PRIVATE one; a
dropped connection resumes without a reload; who is signed in, the goals the agent checks,
rating, forking and deleting; the goals and tasks panel beside the conversation at any
window size."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roboz.server import ThreadApiError
from roboz.threads import AgentTask, AgentThreadStatus, ThreadVisibility
from tests.server.ui.conftest import UiServer, sign_in

SCREENSHOT_ENV = "ROBOZ_UI_SCREENSHOT"
"""Set to a PNG path to have the first test write the docs' screenshot there."""


def _status(page: Any, status: str) -> None:
    page.wait_for_selector(f'#thread-status[data-status="{status}"]')


def _send(page: Any, text: str, goal: str = "") -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    if goal:
        page.get_by_label("Goal for this turn").select_option(goal)
    box.press("Control+Enter")  # the keyboard way


def _kinds(page: Any) -> set[str]:
    return set(
        page.eval_on_selector_all("#messages [data-kind]", "n => n.map(e => e.dataset.kind)")
    )


def test_a_thread_from_creation_to_goal_with_a_client_tool_answered_in_the_page(
    ui_server: UiServer, chromium: Any
) -> None:
    page = chromium("bob")
    sign_in(page, ui_server, "bob")
    page.get_by_label("New thread title").fill("Weekly plan")
    page.get_by_role("button", name="New thread").click()
    page.get_by_role("heading", name="Weekly plan").wait_for()
    _send(page, "plan the week", goal="say_ok")

    # The agent calls the client tool `confirm`: the page asks, and the answer goes back.
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    assert "Delete the draft?" in dialog.inner_text()
    assert page.evaluate("document.activeElement.id") == "tool-yes"
    page.get_by_role("button", name="Yes").click()
    _status(page, "user_turn")
    tasks = page.eval_on_selector_all("#tasks li", "n => n.map(e => e.dataset.status)")
    assert tasks == ["completed", "completed"]
    assert page.eval_on_selector_all("#goals li", "n => n.map(e => e.dataset.status)") == [
        "achieved"
    ]
    assert "you said yes" in page.locator("#messages").inner_text()

    # An image a tool returned, an error, and a user's viewing context.
    _send(page, "chart it")
    page.wait_for_selector("figure.image img")
    _status(page, "user_turn")
    _send(page, "fail please")
    page.wait_for_selector('[data-kind="error"]')
    _status(page, "user_turn")
    bob = ui_server.client("bob")
    thread_id = page.evaluate("decodeURIComponent(location.hash.split('/')[2])")
    bob.send_message(thread_id, "hello 3", viewing_context={"dataset_ids": ["ds_7"]})
    page.wait_for_selector('[data-kind="client_context"]')
    _status(page, "user_turn")
    assert _kinds(page) >= {"text", "tool_use", "tool_result", "error", "client_context"}
    width = page.eval_on_selector("figure.image img", "img => img.naturalWidth")
    assert width == 24  # the PNG itself decoded, not a broken image
    # draw_chart returned a StrImage: its text beside its image, no JSON of it shown.
    result = page.locator('[data-kind="tool_result"]', has=page.locator("figure.image"))
    assert "The numbers, week by week" in result.locator("p.caption").inner_text()
    assert "draw_chart: The numbers, week by week" in result.locator("figcaption").inner_text()
    assert result.locator("pre").count() == 0

    stored = bob.get_thread(thread_id)
    shown = page.eval_on_selector_all("#messages > article", "n => n.length")
    assert shown == len(stored.messages)

    if os.environ.get(SCREENSHOT_ENV):
        page.evaluate("() => document.activeElement.blur()")
        page.locator("figure.image").scroll_into_view_if_needed()
        page.screenshot(path=str(Path(os.environ[SCREENSHOT_ENV])))

    # A reload shows the same thread (it is in the URL), read again from the server.
    before = page.inner_text("#messages")
    page.reload()
    page.get_by_role("heading", name="Weekly plan").wait_for()
    page.wait_for_selector("#messages > article")
    assert page.inner_text("#messages") == before
    assert page.errors == []


def test_a_reply_streams_in_and_a_turn_is_cancelled_from_the_page(
    ui_server: UiServer, chromium: Any
) -> None:
    page = chromium("bob")
    sign_in(page, ui_server, "bob")
    page.get_by_label("Agent", exact=True).select_option("slow")
    page.get_by_role("button", name="New thread").click()
    page.get_by_role("heading", name="Untitled thread").wait_for()
    _send(page, "count for me 12")
    reply = page.locator("#messages article.assistant").last
    page.wait_for_selector("#messages article.assistant.generating")
    lengths = []
    for _ in range(4):
        lengths.append(len(reply.inner_text()))
        page.wait_for_timeout(250)
    assert lengths == sorted(lengths) and lengths[-1] > lengths[0], lengths  # it grew live
    _status(page, "user_turn")
    assert "word11" in reply.inner_text()

    _send(page, "a very long answer 400")
    page.wait_for_selector("#messages article.assistant.generating")
    cancel = page.get_by_role("button", name="Cancel turn")
    cancel.click()
    _status(page, "user_turn")
    page.wait_for_selector('[data-kind="error"].cancelled')
    assert cancel.is_disabled()
    assert page.errors == []


def test_another_user_of_the_org_sees_org_threads_only_and_pins_and_searches(
    ui_server: UiServer, chromium: Any
) -> None:
    bob = ui_server.client("bob")
    shared = bob.create_thread(title="Team budget", visibility=ThreadVisibility.ORG)
    bob.create_thread(title="Bob's diary", visibility=ThreadVisibility.PRIVATE)
    other = bob.create_thread(title="Team lunch", visibility=ThreadVisibility.ORG)
    del other

    page = chromium("cat")  # a second browser, its own profile: another user of acme
    sign_in(page, ui_server, "cat")
    page.wait_for_selector("#thread-list li")
    titles = page.eval_on_selector_all("#thread-list .title", "n => n.map(e => e.textContent)")
    assert sorted(titles) == ["Team budget", "Team lunch"]

    page.get_by_role("button", name="Pin Team budget").click()
    page.get_by_role("button", name="Unpin Team budget").wait_for()
    titles = page.eval_on_selector_all("#thread-list .title", "n => n.map(e => e.textContent)")
    assert titles[0] == "Team budget"
    assert (
        ui_server.client("cat").list_threads(pinned=True).threads[0].thread_id == shared.thread_id
    )

    page.get_by_label("Search threads").fill("budget")
    page.wait_for_function("() => document.querySelectorAll('#thread-list li').length === 1")
    page.get_by_label("Search threads").fill("diary")
    page.wait_for_function("() => document.querySelectorAll('#thread-list li').length === 0")

    # The private thread's address shows nothing of it to cat.
    diary = next(t for t in bob.list_threads().threads if t.title == "Bob's diary")
    page.goto(f"{ui_server.url}/#/threads/{diary.thread_id}")
    page.wait_for_function(
        "() => document.querySelector('#empty p').textContent.includes('no thread')"
    )
    assert "diary" not in page.inner_text("#thread").lower()


def test_a_dropped_connection_resumes_without_a_reload(ui_server: UiServer, chromium: Any) -> None:
    bob = ui_server.client("bob")
    thread = bob.create_thread(title="Survives restarts")
    page = chromium("bob")
    sign_in(page, ui_server, "bob")
    page.get_by_role("link", name="Survives restarts").click()
    page.wait_for_selector('#connection[data-state="live"]')
    page.evaluate("window.__sameDocument = 'yes'")

    ui_server.stop()  # every connection drops; the page keeps trying
    page.wait_for_selector('#connection[data-state="reconnecting"]')
    ui_server.start()
    page.wait_for_selector('#connection[data-state="live"]')
    bob = ui_server.client("bob")
    bob.send_message(thread.thread_id, "after the restart 4")
    page.wait_for_function(
        "() => document.querySelector('#messages').innerText.includes('word3')", timeout=20_000
    )
    _status(page, "user_turn")
    assert page.evaluate("window.__sameDocument") == "yes"  # no reload happened
    assert int(page.get_attribute("#connection", "data-reconnects") or 0) >= 1
    stored = bob.get_thread(thread.thread_id)
    assert stored.status is AgentThreadStatus.USER_TURN
    assert page.eval_on_selector_all("#messages > article", "n => n.length") == len(stored.messages)


def test_every_control_is_labelled_and_the_conversation_is_announced(
    ui_server: UiServer, chromium: Any
) -> None:
    page = chromium("bob")
    sign_in(page, ui_server, "bob")
    page.get_by_role("button", name="New thread").click()
    page.wait_for_selector("#thread-view:not([hidden])")
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea, button')]
            .filter(e => !e.closest('[hidden]'))
            .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                         && !e.textContent.trim())
            .map(e => e.id || e.outerHTML)"""
    )
    assert unlabelled == []
    log = page.locator("#messages")
    assert log.get_attribute("role") == "log" and log.get_attribute("aria-live") == "polite"
    assert page.get_attribute("#connection", "role") == "status"
    # Keyboard: from the title field, Tab reaches the visibility, agent and create controls.
    page.get_by_label("New thread title").focus()
    order = []
    for _ in range(3):
        page.keyboard.press("Tab")
        order.append(
            page.evaluate("document.activeElement.id || document.activeElement.textContent")
        )
    assert order == ["new-visibility", "new-agent", "New thread"]


def test_who_is_signed_in_goal_choices_rating_forking_and_deleting(
    ui_server: UiServer, chromium: Any
) -> None:
    bob = ui_server.client("bob")
    shared = bob.create_thread(title="Team plan", visibility=ThreadVisibility.ORG)
    before = bob.get_thread(shared.thread_id)
    bob.send_message(shared.thread_id, "hello there 3")
    list(bob.stream_deltas(shared.thread_id, record=before))

    page = chromium("bob")
    sign_in(page, ui_server, "bob")
    assert page.inner_text("#whoami") == "bob · acme"
    page.get_by_role("link", name="Team plan").click()
    page.wait_for_selector("#messages > article.assistant")
    # The goal types the thread's agent checks are offered, none by default.
    options = page.eval_on_selector_all("#goal-type option", "n => n.map(o => o.value)")
    assert options == ["", "say_ok"]

    # Rating the agent's message and the thread: pressed in the page, recorded for bob.
    reply = page.locator("#messages article.assistant").last
    seq = int(reply.get_attribute("data-seq") or -1)
    page.get_by_role("button", name=f"Rate message {seq + 1} good").click()
    page.wait_for_selector(f'[data-seq="{seq}"] [data-rating="positive"][aria-pressed="true"]')
    page.get_by_role("button", name="Rate this thread bad").click()
    page.wait_for_selector('#rate-down[aria-pressed="true"]')
    assert page.get_attribute("#rate-up", "aria-pressed") == "false"
    assert sorted(ui_server.store.ratings(shared.thread_id), key=str) == sorted(
        [("bob", seq, "positive", None), ("bob", None, "negative", None)], key=str
    )

    # Forking from the user's message: a new thread of bob's with the messages up to it.
    page.get_by_role("button", name="Fork the thread from message 1").click()
    page.get_by_role("heading", name="Fork of Team plan").wait_for()
    fork_id = page.evaluate("decodeURIComponent(location.hash.split('/')[2])")
    assert fork_id != shared.thread_id
    assert page.eval_on_selector_all("#messages > article", "n => n.length") == 1
    assert len(bob.get_thread(fork_id).messages) == 1

    # Deleting asks first; keeping it changes nothing, confirming removes it for everyone.
    page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog")
    assert "Fork of Team plan" in dialog.inner_text()
    assert page.evaluate("document.activeElement.id") == "confirm-no"
    page.get_by_role("button", name="Keep it").click()
    assert bob.get_thread(fork_id).title == "Fork of Team plan"
    page.get_by_role("button", name="Delete").click()
    page.locator("#confirm-yes").click()
    page.wait_for_selector("#empty:not([hidden])")
    page.wait_for_function(
        "() => document.querySelector('#list-caption').textContent.includes('Deleted')"
    )
    titles = page.eval_on_selector_all("#thread-list .title", "n => n.map(e => e.textContent)")
    assert titles == ["Team plan"]
    with pytest.raises(ThreadApiError) as gone:
        bob.get_thread(fork_id)
    assert gone.value.status == 404
    assert page.errors == []

    # Another member of the org reads the ORG thread but may not change it: no Delete, no
    # composer; forking gives them a thread of their own to go on in.
    other = chromium("cat")
    sign_in(other, ui_server, "cat")
    assert other.inner_text("#whoami") == "cat · acme"
    other.get_by_role("link", name="Team plan").click()
    other.wait_for_selector("#messages > article.assistant")
    assert other.locator("#delete-thread").is_hidden()
    assert other.locator("#message").is_disabled() and other.locator("#send").is_disabled()
    assert "Only bob or an admin of acme" in other.inner_text("#composer-help")
    other.get_by_role("button", name="Fork", exact=True).click()
    other.get_by_role("heading", name="Fork of Team plan").wait_for()
    other.wait_for_selector("#message:not([disabled])")
    assert other.locator("#delete-thread").is_visible()

    admin = chromium("ann")
    sign_in(admin, ui_server, "ann")
    assert admin.inner_text("#whoami") == "ann · acme · admin"
    assert other.errors == [] and admin.errors == []


def test_the_goals_and_tasks_panel_never_covers_the_conversation(
    ui_server: UiServer, chromium: Any
) -> None:
    bob = ui_server.client("bob")
    thread = bob.create_thread(title="Long and busy")
    for n in range(6):
        before = bob.get_thread(thread.thread_id)
        bob.send_message(thread.thread_id, "chart it" if n % 2 else "talk 60")
        list(bob.stream_deltas(thread.thread_id, record=before))
    tasks = [AgentTask(task_id=i, position=i, title=f"Step {i}") for i in range(14)]
    ui_server.store.set_tasks(thread.thread_id, tasks)

    page = chromium("bob")
    sign_in(page, ui_server, "bob")
    page.get_by_role("link", name="Long and busy").click()
    page.wait_for_selector("#messages > article")
    for width, height in ((1200, 800), (1200, 560), (900, 600)):
        page.set_viewport_size({"width": width, "height": height})
        for where in ("0", "m.scrollHeight / 2", "m.scrollHeight"):
            page.evaluate(
                f"() => {{ const m = document.getElementById('messages'); m.scrollTop = {where}; }}"
            )
            boxes = page.evaluate(
                """() => Object.fromEntries(['state', 'messages', 'composer'].map(id => {
                    const r = document.getElementById(id).getBoundingClientRect();
                    return [id, [r.left, r.top, r.right, r.bottom]];
                }))"""
            )
            state, messages, composer = boxes["state"], boxes["messages"], boxes["composer"]
            apart = (
                state[2] <= messages[0]
                or messages[2] <= state[0]
                or state[3] <= messages[1]
                or messages[3] <= state[1]
            )
            assert apart, (width, height, where, boxes)
            assert messages[3] <= composer[1], (width, height, boxes)  # nor the composer
            assert messages[3] - messages[1] >= 140, (width, height, boxes)  # room to read
        # The message box and Send stay reachable, scrolling the view if the window is short.
        page.get_by_role("button", name="Send").scroll_into_view_if_needed()
        assert page.get_by_role("button", name="Send").is_visible()
    assert page.errors == []
