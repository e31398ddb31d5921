// Client tools: offered to the agent with every message, run here in the browser when the
// agent calls one, their results submitted to the thread.

export const CLIENT_TOOLS = [
  {
    name: "confirm",
    description: "Ask the user a yes/no question in their browser.",
    input_schema: {
      type: "object",
      properties: { question: { type: "string" } },
      required: ["question"],
    },
  },
  {
    name: "pick_files",
    description: "Ask the user to pick files in their browser; returns their names and sizes.",
    input_schema: { type: "object", properties: { pattern: { type: "string" } } },
  },
];

// Runs one tool use in a modal dialog and resolves with its result.
export function runClientTool(use) {
  const dialog = document.getElementById("tool-dialog");
  const question = document.getElementById("tool-question");
  const files = document.getElementById("tool-files");
  const input = document.getElementById("tool-file-input");
  const yes = document.getElementById("tool-yes");
  const no = document.getElementById("tool-no");
  const args = use.input || {};
  const picking = use.tool_name === "pick_files";
  document.getElementById("tool-title").textContent =
    picking ? "The agent asks for files" : "The agent asks";
  question.textContent = picking
    ? `Pick files${args.pattern ? ` (${args.pattern})` : ""} to share with the agent.`
    : String(args.question || "Go ahead?");
  files.hidden = !picking;
  input.value = "";
  yes.textContent = picking ? "Share" : "Yes";
  no.textContent = picking ? "Share nothing" : "No";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const answer = dialog.returnValue === "yes";
      if (picking) {
        resolve(answer ? Array.from(input.files, (f) => ({ name: f.name, size: f.size })) : []);
      } else {
        resolve(answer ? "yes" : "no");
      }
    }, { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    (picking ? input : yes).focus();
  });
}

export function isClientTool(name) {
  return CLIENT_TOOLS.some((tool) => tool.name === name);
}
