// Runs the GraphQL clients a frontend uses against a running API and prints one JSON line per
// check: node run_clients.mjs --url http://127.0.0.1:8000 --key wak_... (or WA_API_URL and
// WA_API_KEY). The key needs worker_automation:read and :write (it dispatches demo.echo).
// Exits 1 when any check fails, 2 on bad arguments.
import { parseArgs } from "node:util";

import { checkNormalizedCache, dispatchEcho, httpClient, queryWorkersPage } from "./http_client.mjs";
import { checkClientSchema } from "./introspection.mjs";
import { check, failures, reportStrayRejections } from "./report.mjs";
import { checkLiveTerminalEvent, checkTaskStatus, graphqlWsClient, legacyWsClient } from "./subscriptions.mjs";

const { values } = parseArgs({ options: { url: { type: "string" }, key: { type: "string" } } });
const apiUrl = (values.url ?? process.env.WA_API_URL ?? "").replace(/\/+$/, "");
const apiKey = values.key ?? process.env.WA_API_KEY ?? "";
if (!apiUrl || !apiKey) {
  process.stderr.write("usage: node run_clients.mjs --url API_URL --key API_KEY\n");
  process.exit(2);
}

reportStrayRejections();
const http = httpClient(apiUrl, apiKey);

await check("http_query", () => queryWorkersPage(http));

let cached = null;
await check("http_mutation", async () => {
  cached = await dispatchEcho(http, "apollo http");
  return `job ${cached.id} ${cached.status}`;
});

await check("normalized_cache", async () => {
  if (cached === null) throw new Error("no job: the mutation failed");
  return checkNormalizedCache(http, cached);
});

// Inner waits end before the check's own deadline, so a failure says what was missing.
const WAIT_MS = 45_000;

for (const [protocol, open] of [
  ["graphql_ws", graphqlWsClient],
  ["legacy_ws", legacyWsClient],
]) {
  const socket = open(apiUrl, apiKey);
  try {
    let finished = null;
    await check(`${protocol}_live_event`, async () => {
      const live = await checkLiveTerminalEvent(socket, () => dispatchEcho(http, protocol), WAIT_MS);
      finished = live.job;
      return live.detail;
    });
    await check(`${protocol}_task_status`, async () => {
      if (finished === null) throw new Error("no finished job: the live event check failed");
      return checkTaskStatus(socket, finished, WAIT_MS);
    });
  } finally {
    socket.close();
  }
}

await check("client_schema", () => checkClientSchema(apiUrl, apiKey));

// Open sockets or timers of a failed check must not keep the process alive.
process.exit(failures() === 0 ? 0 : 1);
