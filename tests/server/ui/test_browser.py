"""The web UI in real headless Chromium against a real server: a user creates a thread, sends
messages and watches replies stream in, answers a client tool in the page, sees the goal
achieved and the tasks done, every content block kind rendered, cancels a turn, reloads to
the same thread; another user of the org sees the ORG thread and not the PRIVATE one; a
dropped connection resumes without a reload."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from roboz.threads import AgentThreadStatus, ThreadVisibility
from tests.server.ui.conftest import UiServer, sign_in

SCREENSHOT_ENV = "ROBOZ_UI_SCREENSHOT"
"""Set to a PNG path to have the first test write the docs' screenshot there."""


def _status(page: Any, status: str) -> None:
    page.wait_for_selector(f'#thread-status[data-status="{status}"]')


def _send(page: Any, text: str, goal: str = "") -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    if goal:
        page.get_by_text("Goal for this turn").click()
        page.get_by_label("Goal type").fill(goal)
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
