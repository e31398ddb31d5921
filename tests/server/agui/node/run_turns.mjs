// Drives `roboz serve` with the real @ag-ui/client: each message of the script is one run of
// an HttpAgent; a call of the frontend tool `confirm` is answered ("yes") with a tool message
// and the agent is run again, as an AG-UI frontend does. Prints one JSON object: the
// messages and state the client holds at the end, the event types per run, and any error.
// Usage: node run_turns.mjs URL TOKEN THREAD_ID MESSAGE... (env FORWARDED: forwardedProps JSON)
import { HttpAgent } from "@ag-ui/client";

const [url, token, threadId, ...script] = process.argv.slice(2);
const forwardedProps = JSON.parse(process.env.FORWARDED || "{}");
const confirm = {
  name: "confirm",
  description: "Ask the user a yes/no question in their browser.",
  parameters: {
    type: "object",
    properties: { question: { type: "string" } },
    required: ["question"],
  },
};

const agent = new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${token}` } });
const runs = [];
let events = [];
let runError = null;
agent.subscribe({
  onEvent({ event }) {
    events.push(event.type);
  },
  onRunErrorEvent({ event }) {
    runError = { message: event.message, code: event.code ?? null };
  },
});

async function run() {
  events = [];
  runError = null;
  let error = null;
  try {
    await agent.runAgent({ tools: [confirm], forwardedProps });
  } catch (caught) {
    error = String(caught && caught.message ? caught.message : caught);
  }
  runs.push({ events, error, runError });
  return error || runError;
}

function pendingConfirms() {
  const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return agent.messages
    .flatMap((m) => (m.role === "assistant" ? m.toolCalls || [] : []))
    .filter((call) => call.function.name === "confirm" && !answered.has(call.id));
}

for (const [index, text] of script.entries()) {
  agent.addMessage({ id: `local-user-${index}`, role: "user", content: text });
  if (await run()) continue;
  for (let rounds = 0; rounds < 5; rounds++) {
    const pending = pendingConfirms();
    if (pending.length === 0) break;
    for (const call of pending) {
      const question = JSON.parse(call.function.arguments).question;
      agent.addMessage({
        id: `local-tool-${call.id}`,
        role: "tool",
        toolCallId: call.id,
        content: JSON.stringify(question ? "yes" : "no"),
      });
    }
    if (await run()) break;
  }
}
process.stdout.write(JSON.stringify({ messages: agent.messages, state: agent.state, runs }));
