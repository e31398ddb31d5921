"""The web UI in headless Chromium (Debian's /usr/bin/chromium through Playwright).

- First paint of a 1,000-message thread: from the page's navigation start to the frame after
  the thread is in the DOM (the page's own ``performance`` timing), beside the paint of an
  empty thread in the same run (the baseline: the page, its scripts and the sign-in).
- Streaming: for each delta of a streamed reply, the time from the SSE event's arrival in the
  page to the frame that shows it (what the UI adds over the SSE latency), against one frame
  (16.7 ms at 60 Hz).

Printed, not asserted. ``python -m benchmarks bench_ui``.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from roboz.threads import AgentMessage, AgentRole, SQLiteThreadStore, ThreadVisibility
from tests.server.conftest import PEOPLE
from tests.server.ui.conftest import ARGS, CHROMIUM, UiServer

FRAME_MS = 1000 / 60


def _thread(store: Any, count: int) -> str:
    bob = store.for_caller(PEOPLE["bob"])
    messages = [
        AgentMessage.text(
            f"message {n}: " + "some words of a longer reply " * 4,
            AgentRole.USER if n % 2 == 0 else AgentRole.ASSISTANT,
        )
        for n in range(count)
    ]
    record = bob.create_thread(
        title=f"{count} messages", visibility=ThreadVisibility.PRIVATE, messages=messages
    )
    return str(record.thread_id)


def _paint_ms(page: Any, url: str) -> float:
    page.goto(url)
    page.wait_for_function("() => performance.getEntriesByName('roboz-thread-painted').length > 0")
    return float(
        page.evaluate("() => performance.getEntriesByName('roboz-thread-painted')[0].startTime")
    )


def main(quick: bool = False) -> int:
    from playwright.sync_api import sync_playwright

    repeats = 2 if quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as folder:
        store = SQLiteThreadStore(Path(folder) / "threads.db")
        server = UiServer(store)
        server.tokens = {who: store.create_api_token(c)[1] for who, c in PEOPLE.items()}
        server.start()
        try:
            big, empty = _thread(store, 1000), _thread(store, 0)
            with sync_playwright() as playwright:
                context = playwright.chromium.launch_persistent_context(
                    str(Path(folder) / "profile"),
                    executable_path=CHROMIUM,
                    args=ARGS,
                    headless=True,
                    viewport={"width": 1200, "height": 800},
                )
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(60_000)
                page.goto(f"{server.url}/")
                page.get_by_label("API token").fill(server.tokens["bob"])
                page.get_by_role("button", name="Sign in").click()
                page.get_by_role("navigation", name="Threads").wait_for()
                base, full = [], []
                for n in range(repeats):  # a new query each time: a new document, new timing
                    base.append(_paint_ms(page, f"{server.url}/?load=e{n}#/threads/{empty}"))
                    full.append(_paint_ms(page, f"{server.url}/?load=f{n}#/threads/{big}"))
                b, f = statistics.median(base), statistics.median(full)
                print(f"first paint, empty thread (baseline): {b:7.1f} ms (median of {repeats})")
                print(
                    f"first paint, 1,000 messages:          {f:7.1f} ms  ({f / b:.2f}x, goal <= 1000 ms)"
                )

                # Streaming: a long reply from the slow agent, its deltas timed in the page.
                bob = server.client("bob")
                thread = bob.create_thread(agent="slow")
                page.goto(f"{server.url}/?s=1#/threads/{thread.thread_id}")
                page.wait_for_selector('#connection[data-state="live"]')
                page.evaluate("() => { window.__roboz.deltas.length = 0; }")
                words = 40 if quick else 120
                bob.send_message(thread.thread_id, f"stream this {words}")
                page.wait_for_selector('#thread-status[data-status="roboto_turn"]')
                page.wait_for_selector('#thread-status[data-status="user_turn"]')
                page.wait_for_timeout(200)
                timings = page.evaluate("() => window.__roboz.deltas")
                context.close()
            dom = [t["rendered"] - t["received"] for t in timings]
            painted = [t["painted"] - t["received"] for t in timings]
            p50, p99 = statistics.median(painted), _p99(painted)
            print(f"streamed deltas: {len(timings)}")
            print(
                f"  arrival -> in the DOM:  p50 {statistics.median(dom):6.2f} ms, p99 {_p99(dom):6.2f} ms"
            )
            print(f"  arrival -> painted:     p50 {p50:6.2f} ms, p99 {p99:6.2f} ms")
            print(
                f"  in frames (16.7 ms):    p50 {p50 / FRAME_MS:5.2f}, p99 {p99 / FRAME_MS:5.2f} (goal <= 1)"
            )
        finally:
            server.close()
            store.close()
    return 0


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


if __name__ == "__main__":
    raise SystemExit(main())
