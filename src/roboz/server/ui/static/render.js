// A thread's messages, goals and tasks as DOM. Everything a thread holds is text to the
// page (textContent, never HTML); images are shown only from data: URLs, which the page's
// Content-Security-Policy allows, so a thread cannot make the page load anything.

const ROLE_NAMES = { user: "You", assistant: "Agent", roboto: "System" };
const IMAGE_URL = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+$/;

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

export function blockKind(block) {
  return block.content_type || (typeof block.text === "string" ? "text" : "unknown");
}

function images(value, found = []) {
  if (typeof value === "string") {
    if (IMAGE_URL.test(value)) found.push(value);
  } else if (Array.isArray(value)) {
    for (const item of value) images(item, found);
  } else if (value && typeof value === "object") {
    for (const item of Object.values(value)) images(item, found);
  }
  return found;
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function withoutImages(value) {
  if (typeof value === "string") return IMAGE_URL.test(value) ? "[image]" : value;
  if (Array.isArray(value)) return value.map(withoutImages);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutImages(v)]));
  }
  return value;
}

function figure(url, label) {
  return el("figure", { class: "image" }, el("img", { src: url, alt: label }),
    el("figcaption", { text: label }));
}

function toolUse(block) {
  const input = block.input && Object.keys(block.input).length ? json(block.input) : null;
  return el("details", { class: "block tool-use", "data-kind": "tool_use" },
    el("summary", {}, el("span", { class: "badge", text: "Tool call" }), ` ${block.tool_name}`),
    input ? el("pre", { text: input }) : el("p", { class: "hint", text: "No arguments." }));
}

// The images a tool returned (StrImage): the payload's "images", each {url, detail?}.
function returnedImages(payload) {
  if (!payload || typeof payload !== "object" || !Array.isArray(payload.images)) return null;
  const urls = payload.images.map((image) => image && image.url).filter((url) => typeof url === "string");
  return urls.length === payload.images.length ? urls : null;
}

function link(url, label) {
  // Another host's image is not loaded by the page (its Content-Security-Policy): a link.
  return el("p", { class: "image-link" },
    el("a", { href: url, rel: "noopener noreferrer", target: "_blank", text: label }));
}

function toolResult(block) {
  let payload = block.payload;
  const returned = returnedImages(payload);
  let caption = null;
  if (returned) {
    const { images: _images, ...rest } = payload;
    const keys = Object.keys(rest);
    if (keys.length === 1 && typeof rest.value === "string") caption = rest.value;
    payload = keys.length && caption === null ? rest : null;
  }
  const embedded = [...(returned || []).filter((url) => IMAGE_URL.test(url)), ...images(payload)];
  const linked = (returned || []).filter((url) => /^https?:\/\//.test(url));
  const ok = block.status === "success";
  const node = el("details", {
    class: `block tool-result ${ok ? "" : "failed"}`, "data-kind": "tool_result",
    open: embedded.length + linked.length > 0,
  },
  el("summary", {}, el("span", { class: "badge", text: ok ? "Result" : `Result: ${block.status}` }),
    ` ${block.tool_name}`, el("span", { class: "hint", text: ` (${block.runtime_ms} ms)` })));
  if (caption !== null) node.append(el("p", { class: "text caption", text: caption }));
  const label = (index) => `Image ${index + 1} from ${block.tool_name}${caption ? `: ${caption}` : ""}`;
  embedded.forEach((url, index) => node.append(figure(url, label(index))));
  linked.forEach((url, index) => node.append(link(url, `${label(embedded.length + index)} (${url})`)));
  if (payload !== null && payload !== undefined) {
    node.append(el("pre", { text: json(withoutImages(payload)) }));
  }
  return node;
}

function errorBlock(block) {
  const cancelled = block.error_code === "cancelled";
  return el("div", { class: `block error ${cancelled ? "cancelled" : ""}`, "data-kind": "error" },
    el("strong", { text: cancelled ? "Cancelled: " : "Error: " }),
    block.error_message, block.error_code && !cancelled ? ` (${block.error_code})` : null);
}

function clientContext(block) {
  const context = block.context || {};
  const list = el("dl");
  for (const [name, value] of Object.entries(context)) {
    const empty = value === null || (Array.isArray(value) && value.length === 0);
    if (empty) continue;
    list.append(el("dt", { text: name.replaceAll("_", " ") }),
      el("dd", { text: Array.isArray(value) ? value.join(", ") : json(value) }));
  }
  return el("details", { class: "block context", "data-kind": "client_context" },
    el("summary", {}, el("span", { class: "badge", text: "Context" }), " what you were viewing"),
    list.childElementCount ? list : el("p", { class: "hint", text: "Nothing selected." }));
}

// One message: consecutive text blocks read as one paragraph (they are pieces of one reply).
export function messageNode(message, seq) {
  const role = message.role;
  const node = el("article", {
    class: `msg ${role} ${message.status}`, "data-seq": String(seq),
    "aria-label": `${ROLE_NAMES[role] || role}, message ${seq + 1}`,
  });
  node.append(el("h3", { class: "who", text: ROLE_NAMES[role] || role }));
  let text = null;
  for (const block of message.content) {
    const kind = blockKind(block);
    if (kind === "text") {
      if (!text) {
        text = el("p", { class: "block text", "data-kind": "text" });
        node.append(text);
      }
      text.append(block.text);
      continue;
    }
    text = null;
    if (kind === "tool_use") node.append(toolUse(block));
    else if (kind === "tool_result") node.append(toolResult(block));
    else if (kind === "error") node.append(errorBlock(block));
    else if (kind === "client_context") node.append(clientContext(block));
    else if (kind === "deleted" || kind === "compression_filler") {
      node.append(el("p", { class: "block hint", "data-kind": kind, text: "(removed when the thread was compressed)" }));
    } else {
      node.append(el("pre", { class: "block", "data-kind": kind, text: json(block) }));
    }
  }
  if (message.status === "generating") {
    node.append(el("p", { class: "typing hint", text: "writing…" }));
    node.setAttribute("aria-busy", "true");
  } else {
    node.append(messageActions(message, seq));
  }
  return node;
}

// Fork from a message, and rate the agent's messages (the page's click handler acts on them).
function messageActions(message, seq) {
  const which = `message ${seq + 1}`;
  const bar = el("div", { class: "msg-actions" },
    el("button", { type: "button", "data-action": "fork", "data-seq": String(seq),
      "aria-label": `Fork the thread from ${which}`, text: "Fork from here" }));
  if (message.role === "assistant") {
    for (const [rating, word] of [["positive", "Good"], ["negative", "Bad"]]) {
      bar.append(el("button", { type: "button", "data-action": "rate", "data-rating": rating,
        "data-seq": String(seq), "aria-pressed": "false",
        "aria-label": `Rate ${which} ${word.toLowerCase()}`, text: word }));
    }
  }
  return bar;
}

export function renderMessages(container, messages) {
  const fragment = document.createDocumentFragment();
  messages.forEach((message, seq) => fragment.append(messageNode(message, seq)));
  container.replaceChildren(fragment);
  container.scrollTop = container.scrollHeight;
}

// After a delta: only the messages it touched are built again.
export function updateMessages(container, messages, touched, reset) {
  // Follow the reply while the reader is at the bottom; leave them be when they scrolled up.
  const following = container.scrollHeight - container.scrollTop - container.clientHeight < 80;
  if (reset !== null && reset !== undefined) {
    while (container.childElementCount > reset) container.lastElementChild.remove();
  }
  for (const seq of touched) {
    const fresh = messageNode(messages[seq], seq);
    const old = container.children[seq];
    if (old) old.replaceWith(fresh);
    else container.append(fresh);
  }
  if (following) container.scrollTop = container.scrollHeight;
}

const GOAL_NAMES = { pending: "pending", achieved: "achieved", failed: "failed" };
const TASK_NAMES = { pending: "to do", in_progress: "in progress", completed: "done", cancelled: "cancelled" };

export function renderState(goalsList, tasksList, thread) {
  const goals = thread.goals || [];
  goalsList.replaceChildren(...(goals.length ? goals.map((goal) =>
    el("li", { class: `goal ${goal.status}`, "data-status": goal.status },
      el("span", { class: "badge", text: GOAL_NAMES[goal.status] || goal.status }), ` ${goal.goal_type}`))
    : [el("li", { class: "hint", text: "No goals." })]));
  const tasks = [...(thread.tasks || [])].sort((a, b) => a.position - b.position);
  tasksList.replaceChildren(...(tasks.length ? tasks.map((task) =>
    el("li", { class: `task ${task.status}`, "data-status": task.status },
      el("span", { class: "badge", text: TASK_NAMES[task.status] || task.status }), ` ${task.title}`))
    : [el("li", { class: "hint", text: "No tasks." })]));
}
