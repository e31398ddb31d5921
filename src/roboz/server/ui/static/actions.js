// What a reader does to a thread besides talking to it: fork it (whole, or from one of its
// messages), rate it or one of the agent's messages, and delete it (its creator or an admin,
// after a confirmation). Ratings made here are shown pressed for the rest of the visit (the
// API records them; it does not read them back).

const $ = (id) => document.getElementById(id);

// Whether `me` may change `thread` (send, cancel, delete): its creator or an admin.
export function canChange(me, thread) {
  return Boolean(me) && (me.admin || thread.created_by === me.user_id);
}

// The buttons of the thread's head and of its messages. `page` gives the page's Api and open
// thread, says what happened (notice), and moves on once a thread was forked or deleted.
export function wireActions(page) {
  async function forkFrom(seq) {
    const thread = page.current().thread;
    const title = `Fork of ${thread.title || "an untitled thread"}`;
    try {
      await page.forked(await page.api().fork(thread.thread_id, { message_sequence_num: seq, title }));
    } catch (error) {
      page.notice(error.message, true);
    }
  }

  async function rateIt(seq, rating) {
    const mine = page.current();
    const body = { rating };
    if (seq !== null) body.message_sequence_num = seq;
    try {
      await page.api().rate(mine.id, body);
    } catch (error) {
      page.notice(error.message, true);
      return;
    }
    mine.ratings.set(seq === null ? "thread" : seq, rating);
    if (mine !== page.current()) return;
    showRatings(mine.ratings);
    const what = seq === null ? "the thread" : `message ${seq + 1}`;
    page.notice(`You rated ${what} ${rating === "positive" ? "good" : "bad"}.`);
  }

  async function deleteIt() {
    const mine = page.current();
    const title = mine.thread.title || "Untitled thread";
    if (!(await confirmDelete(title))) {
      $("delete-thread").focus();
      return;
    }
    try {
      await page.api().remove(mine.id);
    } catch (error) {
      page.notice(error.message, true);
      return;
    }
    await page.closed(title);
  }

  const open = (act) => () => page.current() && act();
  $("messages").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || !page.current()) return;
    const seq = Number(button.dataset.seq);
    if (button.dataset.action === "fork") forkFrom(seq);
    else if (button.dataset.action === "rate") rateIt(seq, button.dataset.rating);
  });
  $("fork-thread").addEventListener("click", open(() => forkFrom(page.current().thread.messages.length - 1)));
  $("rate-up").addEventListener("click", open(() => rateIt(null, "positive")));
  $("rate-down").addEventListener("click", open(() => rateIt(null, "negative")));
  $("delete-thread").addEventListener("click", open(deleteIt));
}

// The page's ratings of the open thread: "thread" or a message's number -> rating.
export function showRatings(ratings) {
  const thread = ratings.get("thread");
  $("rate-up").setAttribute("aria-pressed", String(thread === "positive"));
  $("rate-down").setAttribute("aria-pressed", String(thread === "negative"));
  for (const button of document.querySelectorAll('#messages [data-action="rate"]')) {
    const given = ratings.get(Number(button.dataset.seq));
    button.setAttribute("aria-pressed", String(given === button.dataset.rating));
  }
}

// Asks in a modal dialog; resolves true when the user confirms.
export function confirmDelete(title) {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = "Delete this thread?";
  $("confirm-text").textContent =
    `“${title}” and all its messages will be gone for everyone who can see it.`;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    $("confirm-no").focus(); // the safe answer first
  });
}
