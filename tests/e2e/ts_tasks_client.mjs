// The official TypeScript SDK's task client (2025-11-25, experimental) against a served site.
// Usage: node ts_tasks_client.mjs SDK_DIR MCP_URL. Prints one JSON object: what the client saw.
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir, url] = process.argv.slice(2);
const load = (path) => import(pathToFileURL(join(sdkDir, "dist", "esm", path)).href);
const { Client } = await load("client/index.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } = await load("types.js");

const client = new Client(
  { name: "ts-tasks-client", version: "1" },
  { capabilities: { elicitation: { form: {} } } },
);
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push({ message: request.params.message, meta: request.params._meta ?? null });
  return { action: "accept", content: { format: "csv" } };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const seen = { capabilities: client.getServerCapabilities(), protocol: client.transport?.protocolVersion };
const tools = (await client.listTools()).tools;
seen.taskSupport = Object.fromEntries(
  tools.filter((t) => t.execution?.taskSupport).map((t) => [t.name, t.execution.taskSupport]),
);

// A long tool as a task: created, polled, its question answered on tasks/result, its result.
seen.messages = [];
for await (const message of client.experimental.tasks.callToolStream(
  { name: "export_catalogue", arguments: {} },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
)) {
  seen.messages.push(
    message.type === "result"
      ? { type: "result", result: message.result }
      : message.type === "error"
        ? { type: "error", error: String(message.error) }
        : { type: message.type, status: message.task.status, taskId: message.task.taskId },
  );
}
seen.asked = asked;

// Another, cancelled while it runs; then the list of the session's tasks.
const created = await client.request(
  { method: "tools/call", params: { name: "slow_compute", arguments: { seconds: 60 } } },
  CreateTaskResultSchema,
  { task: { ttl: 60000 } },
);
seen.cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
seen.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => [t.taskId, t.status]);
await client.close();
console.log(JSON.stringify(seen));
