// The page: sign in with a token (who it acts as shown in the bar), list and search threads
// (pins first), open one, follow its deltas live, send messages (with a goal the thread's
// agent checks), answer client tools, cancel a turn, fork, rate and delete. The open thread
// is in the URL (#/threads/ID), so a reload shows it again.

import { canChange, showRatings, wireActions } from "./actions.js";
import { Api, ApiError, DeltaStream } from "./api.js";
import { el, renderMessages, renderState, updateMessages } from "./render.js";
import { applyDelta, pendingToolUses } from "./thread.js";
import { CLIENT_TOOLS, isClientTool, runClientTool } from "./tools.js";

const TOKEN_KEY = "roboz.token";
const $ = (id) => document.getElementById(id);
const STATUS_TEXT = {
  not_started: "New thread: send the first message.",
  user_turn: "Your turn.",
  roboto_turn: "The agent is working…",
  client_tool_turn: "The agent waits for your answer.",
  goals_failed: "The agent could not meet every goal of the turn.",
};

// Timings the benchmark reads: when each delta arrived, was in the DOM, and was painted.
const stats = { deltas: [], opened: [] };
window.__roboz = stats;

let api = null;
let me = null; // who the token acts as: { user_id, org_id, admin }
let agents = { byName: {}, default: null }; // the served agents and their goal types
let current = null; // { id, thread, stream, handled: Set, answering, ratings: Map }
let searchTimer = null;

function nextPaint() {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

function showError(node, error) {
  node.textContent = error ? (error.message || String(error)) : "";
}

// -- signing in ----------------------------------------------------------------------------

function showSignin(message) {
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  $("token").focus();
}

async function enter(token) {
  api = new Api(token);
  let served;
  try {
    [served, me] = await Promise.all([api.agents(), api.me()]);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      showSignin("That token is unknown or revoked.");
      return;
    }
    showSignin(`The server did not answer: ${error.message}`);
    return;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("whoami").textContent = `${me.user_id} · ${me.org_id}${me.admin ? " · admin" : ""}`;
  agents = { byName: Object.fromEntries(served.agents.map((a) => [a.name, a])), default: served.default };
  $("new-agent").replaceChildren(...served.agents.map((agent) =>
    el("option", { value: agent.name, selected: agent.name === served.default, text: agent.name })));
  await loadList();
  await route();
}

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  localStorage.setItem(TOKEN_KEY, token);
  $("token").value = "";
  await enter(token);
});

$("signout").addEventListener("click", () => {
  localStorage.removeItem(TOKEN_KEY);
  me = null;
  $("whoami").textContent = "";
  closeThread();
  location.hash = "";
  showSignin("");
});

// -- the thread list -------------------------------------------------------------------------

async function loadList() {
  const query = $("search-text").value.trim();
  let page;
  try {
    page = query ? await api.search(query) : await api.threads();
  } catch (error) {
    $("list-caption").textContent = `Could not load threads: ${error.message}`;
    return;
  }
  const threads = page.threads.slice();
  // Pinned threads first (most recently pinned on top), then the rest as the server sent them.
  threads.sort((a, b) => (b.pinned_at ? Date.parse(b.pinned_at) : 0) - (a.pinned_at ? Date.parse(a.pinned_at) : 0));
  $("list-caption").textContent = query
    ? `${threads.length} thread${threads.length === 1 ? "" : "s"} match “${query}”.`
    : threads.length ? "" : "No threads yet.";
  $("thread-list").replaceChildren(...threads.map(listItem));
}

function listItem(thread) {
  const title = thread.title || "Untitled thread";
  const open = el("a", {
    href: `#/threads/${encodeURIComponent(thread.thread_id)}`, class: "open",
    "aria-current": current && current.id === thread.thread_id ? "page" : null,
  }, el("span", { class: "title", text: title }),
  el("span", { class: "hint", text: ` ${thread.visibility === "org" ? "Organization" : "Private"} · ${thread.created_by}` }));
  const pinned = Boolean(thread.pinned_at);
  const pin = el("button", {
    type: "button", class: "pin", "aria-pressed": String(pinned),
    "aria-label": `${pinned ? "Unpin" : "Pin"} ${title}`, text: pinned ? "★" : "☆",
  });
  pin.addEventListener("click", async () => {
    try {
      await api.pin(thread.thread_id, !pinned);
      await loadList();
      document.querySelector(`[data-thread="${CSS.escape(thread.thread_id)}"] .pin`)?.focus();
    } catch (error) {
      $("list-caption").textContent = error.message;
    }
  });
  return el("li", { "data-thread": thread.thread_id, class: pinned ? "pinned" : "" }, pin, open);
}

$("search").addEventListener("submit", (event) => {
  event.preventDefault();
  loadList();
});
$("search-text").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(loadList, 250);
});

$("new-thread").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { visibility: $("new-visibility").value, agent: $("new-agent").value || null };
  const title = $("new-title").value.trim();
  if (title) body.title = title;
  try {
    const thread = await api.create(body);
    $("new-title").value = "";
    location.hash = `#/threads/${encodeURIComponent(thread.thread_id)}`;
    await loadList();
    $("message").focus();
  } catch (error) {
    $("list-caption").textContent = error.message;
  }
});

// -- the open thread ---------------------------------------------------------------------------

async function route() {
  const match = /^#\/threads\/(.+)$/.exec(location.hash);
  if (!match) {
    closeThread();
    return;
  }
  const id = decodeURIComponent(match[1]);
  if (current && current.id === id) return;
  await openThread(id);
}

window.addEventListener("hashchange", () => api && route());

function closeThread() {
  if (current && current.stream) current.stream.stop();
  current = null;
  $("thread-view").hidden = true;
  $("empty").hidden = false;
}

async function openThread(id) {
  closeThread();
  const started = performance.now();
  let thread;
  try {
    thread = await api.thread(id);
  } catch (error) {
    $("empty").hidden = false;
    $("empty").querySelector("p").textContent = error.message;
    return;
  }
  current = { id, thread, stream: null, handled: new Set(), answering: false, ratings: new Map() };
  $("empty").hidden = true;
  $("thread-view").hidden = false;
  notice("");
  renderMessages($("messages"), thread.messages);
  showRatings(current.ratings);
  goalChoices(thread);
  showThread(thread);
  for (const link of document.querySelectorAll("#thread-list a.open")) {
    link.toggleAttribute("aria-current", false);
    if (link.closest("li").dataset.thread === id) link.setAttribute("aria-current", "page");
  }
  $("thread-title").focus();
  await nextPaint();
  stats.opened.push({ id, messages: thread.messages.length, ms: performance.now() - started });
  performance.mark("roboz-thread-painted");
  const mine = current;
  mine.stream = new DeltaStream(api, id, thread.continuation_token, {
    onDelta: (delta, received) => mine === current && onDelta(delta, received),
    onState: (state, detail) => mine === current && connection(state, detail),
  });
  answerClientTools();
}

function showThread(thread) {
  $("thread-title").textContent = thread.title || "Untitled thread";
  $("thread-meta").textContent =
    `${thread.visibility === "org" ? "Visible to your organization" : "Private"} · started by ${thread.created_by}`;
  $("thread-status").textContent = STATUS_TEXT[thread.status] || thread.status;
  $("thread-status").dataset.status = thread.status;
  renderState($("goals"), $("tasks"), thread);
  const running = thread.status === "roboto_turn";
  const mine = canChange(me, thread);
  $("cancel").disabled = !running || !mine;
  $("send").disabled = running || thread.status === "client_tool_turn" || !mine;
  $("message").disabled = !mine;
  $("composer-help").textContent = mine
    ? "Ctrl+Enter sends."
    : `Only ${thread.created_by} or an admin of ${thread.org_id} can continue this thread; fork it to go on.`;
  $("delete-thread").hidden = !mine;
  $("fork-thread").disabled = !thread.messages.length || running;
}

// The goal types the thread's agent checks, offered for the next turn.
function goalChoices(thread) {
  const agent = agents.byName[thread.created_from_agent_id] || agents.byName[agents.default];
  const types = (agent && agent.goal_types) || [];
  $("goal-field").hidden = types.length === 0;
  $("goal-type").replaceChildren(el("option", { value: "", text: "None" }),
    ...types.map((type) => el("option", { value: type, text: type })));
}

function notice(text, failed = false) {
  $("thread-notice").textContent = text;
  $("thread-notice").classList.toggle("error", failed);
}

function onDelta(delta, received) {
  const before = current.thread.status;
  let applied;
  try {
    applied = applyDelta(current.thread, delta);
  } catch (error) {
    // A gap: read the thread again rather than show it wrong.
    openThread(current.id);
    return;
  }
  current.thread = applied.thread;
  updateMessages($("messages"), applied.thread.messages, applied.touched, applied.reset);
  showRatings(current.ratings);
  showThread(applied.thread);
  const rendered = performance.now();
  requestAnimationFrame(() => {
    stats.deltas.push({ received, rendered, painted: performance.now() });
    if (stats.deltas.length > 5000) stats.deltas.shift();
  });
  if (applied.thread.status !== before && applied.thread.status !== "roboto_turn") loadList();
  answerClientTools();
}

function connection(state, detail) {
  const node = $("connection");
  node.dataset.state = state;
  node.dataset.reconnects = String(current.stream ? current.stream.reconnects : 0);
  node.textContent = {
    live: "Connected",
    reconnecting: "Connection lost: reconnecting…",
    gone: `This thread is no longer available${detail ? `: ${detail}` : ""}.`,
  }[state];
}

async function answerClientTools() {
  const mine = current;
  if (!mine || mine.answering || mine.thread.status !== "client_tool_turn") return;
  const uses = pendingToolUses(mine.thread).filter((u) => isClientTool(u.tool_name) && !mine.handled.has(u.tool_use_id));
  if (!uses.length) return;
  mine.answering = true;
  try {
    const results = {};
    for (const use of uses) {
      mine.handled.add(use.tool_use_id);
      results[use.tool_use_id] = await runClientTool(use);
    }
    if (mine === current) await api.results(mine.id, results);
  } catch (error) {
    showError($("composer-error"), error);
  } finally {
    mine.answering = false;
  }
}

// -- the composer ----------------------------------------------------------------------------

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!current) return;
  const text = $("message").value;
  if (!text.trim()) return;
  const goal = $("goal-type").value;
  const body = { text, client_tools: CLIENT_TOOLS, goals: goal ? [{ goal_type: goal }] : [] };
  showError($("composer-error"), null);
  $("send").disabled = true;
  try {
    await api.send(current.id, body);
    $("message").value = "";
    $("goal-type").value = ""; // a goal is declared for one turn
  } catch (error) {
    showError($("composer-error"), error);
    $("send").disabled = false;
  }
});

$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

$("cancel").addEventListener("click", async () => {
  if (!current) return;
  try {
    await api.cancel(current.id);
  } catch (error) {
    showError($("composer-error"), error);
  }
});

// -- fork, rate, delete ------------------------------------------------------------------------

wireActions({
  api: () => api,
  current: () => current,
  notice,
  async closed(title) {
    location.hash = "";
    closeThread();
    await loadList();
    $("list-caption").textContent = `Deleted “${title}”.`;
    $("new-title").focus();
  },
  async forked(thread) {
    location.hash = `#/threads/${encodeURIComponent(thread.thread_id)}`;
    await loadList();
  },
});

const saved = localStorage.getItem(TOKEN_KEY);
if (saved) enter(saved);
else showSignin("");
