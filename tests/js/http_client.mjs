// Apollo Client over HTTP, the way a frontend talks to the API: the key in a header, a normalized
// cache in which a job read by two different queries is one entry.
import { ApolloClient, HttpLink, InMemoryCache } from "@apollo/client";

import { DISPATCH, ONE_WORKER, WORKERS_BY_TASK, WORKERS_PAGE } from "./operations.mjs";
import { expect } from "./report.mjs";

const POLL_MS = 100;

export function httpClient(apiUrl, apiKey) {
  return new ApolloClient({
    link: new HttpLink({ uri: `${apiUrl}/graphql`, headers: { "X-API-Key": apiKey } }),
    cache: new InMemoryCache(),
  });
}

/** A page of jobs and the automation catalogue, which lists demo.echo. */
export async function queryWorkersPage(client) {
  const { data } = await client.query({ query: WORKERS_PAGE, fetchPolicy: "network-only" });
  expect(data?.workers?.page === 1, `workers.page is not 1: ${JSON.stringify(data)}`);
  const keys = data.automations.map((automation) => automation.key);
  expect(keys.includes("demo.echo"), `demo.echo is not among the automations: ${keys.join(", ")}`);
  return `${data.workers.total} jobs, ${keys.length} automations`;
}

/** dispatchAutomation of demo.echo; the new job as the server returned it. */
export async function dispatchEcho(client, label) {
  const { data } = await client.mutate({
    mutation: DISPATCH,
    variables: { input: { automationType: "demo.echo", context: { eco: label } } },
  });
  const job = data?.dispatchAutomation;
  expect(job && Number.isInteger(job.id), `no job in the answer: ${JSON.stringify(data)}`);
  expect(job.automationType === "demo.echo", `dispatched ${job.automationType}, not demo.echo`);
  expect(typeof job.taskId === "string" && job.taskId.length > 0, `job ${job.id} has no task id`);
  return job;
}

/**
 * The job read by `worker(id)` and by `workers(filter: {taskId})` is one cache entry, and a later
 * read of it through one query is what the other query then shows from the cache.
 */
export async function checkNormalizedCache(client, job) {
  const ref = `Worker:${job.id}`;
  const identified = client.cache.identify({ __typename: "Worker", id: job.id });
  expect(identified === ref, `cache.identify gave ${identified}, not ${ref}`);

  await client.query({ query: ONE_WORKER, variables: { id: job.id }, fetchPolicy: "network-only" });
  await client.query({ query: WORKERS_BY_TASK, variables: { taskId: job.taskId }, fetchPolicy: "network-only" });
  const stored = client.cache.extract();
  expect(stored[ref], `cache.extract() has no ${ref}: ${Object.keys(stored).join(", ")}`);
  const workers = Object.keys(stored).filter((key) => key.startsWith("Worker:"));
  const root = stored.ROOT_QUERY ?? {};
  const byId = root[`worker({"id":${job.id}})`];
  expect(byId?.__ref === ref, `worker(id) is not stored as a reference to ${ref}: ${JSON.stringify(byId)}`);
  const listKey = Object.keys(root).find((key) => key.startsWith("workers(") && key.includes(job.taskId));
  const items = listKey ? root[listKey].items : undefined;
  expect(
    Array.isArray(items) && items.length === 1 && items[0].__ref === ref,
    `workers(filter: {taskId}) does not hold the reference ${ref}: ${JSON.stringify(root[listKey])}`,
  );

  // Read the job again through worker(id) until it has run; the list query, answered from the
  // cache alone, must show the same new status without asking the server.
  let status = job.status;
  while (status !== "CONCLUIDO") {
    expect(!["FALHA", "CANCELADO"].includes(status), `job ${job.id} ended ${status}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    const { data } = await client.query({ query: ONE_WORKER, variables: { id: job.id }, fetchPolicy: "network-only" });
    status = data.worker.status;
  }
  const cached = client.readQuery({ query: WORKERS_BY_TASK, variables: { taskId: job.taskId } });
  const listed = cached?.workers?.items?.[0]?.status;
  expect(listed === "CONCLUIDO", `the list read from the cache shows ${listed}, not CONCLUIDO`);
  return `${ref} is one entry for both queries (${workers.length} Worker entries); both show CONCLUIDO`;
}
