// A thread as the page holds it, grown by deltas with the thread model's rules
// (AgentThreadRecord.apply_delta): a held message gets the delta's blocks appended and takes
// its status; the next index is a new message; a reset first drops the rewound messages.

export function applyDelta(thread, delta) {
  const messages = thread.messages.slice();
  const reset = delta.reset_from_message_sequence_num;
  if (reset !== null && reset !== undefined) messages.length = Math.min(messages.length, reset);
  const touched = [];
  const indices = Object.keys(delta.messages_by_idx).map(Number).sort((a, b) => a - b);
  for (const index of indices) {
    const message = delta.messages_by_idx[index];
    if (index < messages.length) {
      const held = messages[index];
      messages[index] = { ...held, content: [...held.content, ...message.content], status: message.status };
    } else if (index === messages.length) {
      messages.push(message);
    } else {
      throw new Error(`delta carries message ${index} but the page holds ${messages.length}: reload the thread`);
    }
    touched.push(index);
  }
  const next = { ...thread, messages, continuation_token: delta.continuation_token };
  for (const name of ["status", "title", "tasks", "goals"]) {
    if (delta[name] !== null && delta[name] !== undefined) next[name] = delta[name];
  }
  return { thread: next, touched, reset: reset ?? null };
}

// Tool uses of the last agent message that have no result yet (what a client tool turn waits for).
export function pendingToolUses(thread) {
  const answered = new Set();
  for (const message of thread.messages) {
    for (const block of message.content) {
      if (block.content_type === "tool_result") answered.add(block.tool_use_id);
    }
  }
  for (let i = thread.messages.length - 1; i >= 0; i--) {
    const message = thread.messages[i];
    if (message.role === "assistant") {
      return message.content.filter((b) => b.content_type === "tool_use" && !answered.has(b.tool_use_id));
    }
  }
  return [];
}
