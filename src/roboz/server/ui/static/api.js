// The thread API from the browser: JSON calls with the bearer token, and the live delta
// stream read with fetch (EventSource cannot send an Authorization header), resumed with
// Last-Event-ID after a dropped connection.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  async call(method, path, body) {
    const headers = { Authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      const error = (data && data.error) || {};
      throw new ApiError(response.status, error.code || "http_error",
        error.message || `${method} ${path}: HTTP ${response.status}`);
    }
    return data;
  }

  agents() { return this.call("GET", "/v1/ai/agents"); }
  me() { return this.call("GET", "/v1/ai/me"); }
  threads(pinned = false) {
    return this.call("GET", `/v1/ai/threads?limit=100${pinned ? "&pinned=true" : ""}`);
  }
  search(query) { return this.call("POST", "/v1/ai/threads/search", { query, limit: 100 }); }
  thread(id) { return this.call("GET", `/v1/ai/threads/${encodeURIComponent(id)}`); }
  create(body) { return this.call("POST", "/v1/ai/threads", body); }
  send(id, body) { return this.call("POST", `/v1/ai/threads/${encodeURIComponent(id)}/messages`, body); }
  results(id, results) {
    return this.call("POST", `/v1/ai/threads/${encodeURIComponent(id)}/tool-results`, { results });
  }
  cancel(id) { return this.call("POST", `/v1/ai/threads/${encodeURIComponent(id)}/cancel`); }
  fork(id, body) { return this.call("POST", `/v1/ai/threads/${encodeURIComponent(id)}/fork`, body); }
  rate(id, body) { return this.call("POST", `/v1/ai/threads/${encodeURIComponent(id)}/rate`, body); }
  remove(id) { return this.call("DELETE", `/v1/ai/threads/${encodeURIComponent(id)}`); }
  pin(id, pinned) {
    return this.call(pinned ? "PUT" : "DELETE", `/v1/ai/threads/${encodeURIComponent(id)}/pin`);
  }
}

// Follows one thread's deltas from `token` until stop(): onDelta(delta) for each, and
// onState("live" | "reconnecting" | "gone", detail) as the connection comes and goes.
export class DeltaStream {
  constructor(api, threadId, token, { onDelta, onState }) {
    this.api = api;
    this.threadId = threadId;
    this.token = token;
    this.onDelta = onDelta;
    this.onState = onState;
    this.stopped = false;
    this.reconnects = 0;
    this.controller = null;
    this.wake = null;
    this.online = () => this.wake && this.wake();
    window.addEventListener("online", this.online);
    this.loop();
  }

  stop() {
    this.stopped = true;
    window.removeEventListener("online", this.online);
    if (this.controller) this.controller.abort();
    if (this.wake) this.wake();
  }

  async loop() {
    let delay = 250;
    while (!this.stopped) {
      try {
        const ended = await this.readOnce();
        if (ended === "gone") {
          this.onState("gone");
          return;
        }
        delay = 250;
      } catch (error) {
        if (this.stopped) return;
        if (error instanceof ApiError && error.status >= 400 && error.status < 500) {
          this.onState("gone", error.message);
          return;
        }
      }
      if (this.stopped) return;
      this.reconnects += 1;
      this.onState("reconnecting");
      await new Promise((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, delay);
      });
      this.wake = null;
      delay = Math.min(delay * 2, 4000);
    }
  }

  async readOnce() {
    this.controller = new AbortController();
    const headers = { Authorization: `Bearer ${this.api.token}`, Accept: "text/event-stream" };
    if (this.token) headers["Last-Event-ID"] = this.token;
    const response = await fetch(
      `/v1/ai/threads/${encodeURIComponent(this.threadId)}/stream`,
      { headers, signal: this.controller.signal, cache: "no-store" },
    );
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      const error = data.error || {};
      throw new ApiError(response.status, error.code, error.message || `HTTP ${response.status}`);
    }
    this.onState("live");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return "closed";
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseEvent(block);
        if (event.name === "delta") {
          const delta = JSON.parse(event.data);
          this.token = event.id || delta.continuation_token;
          this.onDelta(delta, performance.now());
        } else if (event.name === "error") {
          return "gone";
        }
      }
    }
  }
}

function parseEvent(block) {
  const event = { name: "message", data: "", id: null };
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event.name = value;
    else if (field === "data") event.data += value;
    else if (field === "id") event.id = value;
  }
  return event;
}
