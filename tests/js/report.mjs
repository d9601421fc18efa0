// One JSON line per check on stdout, so the Python test can read each outcome on its own.
// A check that throws or outlives its deadline is a failure; the run goes on to the next check.

const results = [];

/** Run `body` as the check `name`; it returns a short detail or throws an Error saying what was wrong. */
export async function check(name, body, { timeoutMs = 60_000 } = {}) {
  const started = Date.now();
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  let line;
  try {
    const detail = await Promise.race([body(), deadline]);
    line = { check: name, status: "pass", detail: detail ?? "", ms: Date.now() - started };
  } catch (error) {
    line = { check: name, status: "fail", detail: describe(error), ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
  results.push(line);
  process.stdout.write(JSON.stringify(line) + "\n");
  return line.status === "pass";
}

/** A rejection nobody handled (a client library's, say) is a failure of its own, not a crash. */
export function reportStrayRejections() {
  process.on("unhandledRejection", (reason) => {
    const line = { check: "unhandled_rejection", status: "fail", detail: describe(reason), ms: 0 };
    results.push(line);
    process.stdout.write(JSON.stringify(line) + "\n");
  });
}

/** Throw with `message` unless `condition` holds. */
export function expect(condition, message) {
  if (!condition) throw new Error(message);
}

export function failures() {
  return results.filter((line) => line.status !== "pass").length;
}

function describe(error) {
  if (error instanceof Error) {
    // Apollo's errors carry the GraphQL errors the server sent; those say more than the wrapper.
    const nested = error.errors ?? error.graphQLErrors;
    if (Array.isArray(nested) && nested.length > 0) {
      return `${error.message}: ${JSON.stringify(nested).slice(0, 1000)}`;
    }
    return error.message;
  }
  if (error && typeof error === "object" && "code" in error) {
    // A websocket CloseEvent: its code and reason are what the server said.
    return `websocket closed ${error.code} ${error.reason ?? ""}`.trim();
  }
  return String(JSON.stringify(error)).slice(0, 1000);
}
