// Subscriptions through Apollo Client's two websocket links: graphql-ws (the
// graphql-transport-ws subprotocol) and the legacy subscriptions-transport-ws (the graphql-ws
// subprotocol). Both carry the key in the connection_init payload, as browsers cannot set headers
// on a websocket.
import { ApolloClient, InMemoryCache } from "@apollo/client";
import { GraphQLWsLink } from "@apollo/client/link/subscriptions";
import { WebSocketLink } from "@apollo/client/link/ws";
import { createClient } from "graphql-ws";
import { SubscriptionClient } from "subscriptions-transport-ws";
import WebSocket from "ws";

import { ECHO_EVENTS, TASK_STATUS } from "./operations.mjs";
import { expect } from "./report.mjs";

// Node's own WebSocket is there from version 22 on; ws is the same API before that.
const WebSocketImpl = globalThis.WebSocket ?? WebSocket;

// How long a dispatched job's first event may take before the job is taken as dispatched before
// the subscription was in place (the server acknowledges a subscription by its first event only).
const FIRST_EVENT_MS = 5_000;
const DISPATCH_ATTEMPTS = 5;

function wsUrl(apiUrl) {
  return `${apiUrl.replace(/^http/, "ws")}/graphql`;
}

/**
 * A graphql-ws client and an Apollo Client on it: `connected` settles once the server acknowledged
 * the connection (the socket opens with the first operation), `close` ends the socket.
 */
export function graphqlWsClient(apiUrl, apiKey) {
  let acknowledged;
  const connected = new Promise((resolve) => (acknowledged = resolve));
  const socket = createClient({
    url: wsUrl(apiUrl),
    webSocketImpl: WebSocketImpl,
    connectionParams: { "X-API-Key": apiKey },
    lazy: true,
    retryAttempts: 0,
    on: { connected: () => acknowledged() },
  });
  const client = new ApolloClient({ link: new GraphQLWsLink(socket), cache: new InMemoryCache() });
  return { client, connected, close: () => socket.dispose() };
}

/** A subscriptions-transport-ws client and an Apollo Client on it, with the same `connected` and `close`. */
export function legacyWsClient(apiUrl, apiKey) {
  const socket = new SubscriptionClient(
    wsUrl(apiUrl),
    { connectionParams: { "X-API-Key": apiKey }, reconnect: false, lazy: true },
    WebSocketImpl,
  );
  const connected = new Promise((resolve) => socket.onConnected(() => resolve()));
  const client = new ApolloClient({ link: new WebSocketLink(socket), cache: new InMemoryCache() });
  const close = () => {
    // ws reports a socket closed while still connecting as an 'error' event, which nobody else
    // listens to once the check is over.
    socket.client?.on?.("error", () => {});
    socket.close();
  };
  return { client, connected, close };
}

/** The events of an open subscription, kept in order, with a wait for the first that matches. */
class Received {
  constructor() {
    this.items = [];
    this.failure = null;
    this.waiters = new Set();
  }

  push(item) {
    this.items.push(item);
    this.wake();
  }

  fail(error) {
    this.failure = error;
    this.wake();
  }

  wake() {
    for (const waiter of this.waiters) waiter();
  }

  /** The first item matching `predicate`, or null after `ms` milliseconds. */
  waitFor(predicate, ms) {
    return new Promise((resolve, reject) => {
      const done = (value) => {
        clearTimeout(timer);
        this.waiters.delete(look);
        resolve(value);
      };
      const look = () => {
        if (this.failure) {
          clearTimeout(timer);
          this.waiters.delete(look);
          reject(this.failure);
          return;
        }
        const found = this.items.find(predicate);
        if (found) done(found);
      };
      const timer = setTimeout(() => done(null), ms);
      this.waiters.add(look);
      look();
    });
  }
}

function collect(client, options, pick) {
  const received = new Received();
  const subscription = client.subscribe(options).subscribe({
    next: (result) => (result.error ? received.fail(result.error) : received.push(pick(result.data))),
    error: (error) => received.fail(error),
    complete: () => received.push({ completed: true }),
  });
  return { received, stop: () => subscription.unsubscribe() };
}

/**
 * workerEvents, opened before the job exists, delivers the job's COMPLETED event (row CONCLUIDO)
 * live. A job whose events do not start arriving is taken as dispatched before the server had the
 * subscription in place, and another is dispatched.
 */
export async function checkLiveTerminalEvent(socket, dispatch, timeoutMs) {
  const { received, stop } = collect(socket.client, { query: ECHO_EVENTS }, (data) => data.workerEvents);
  try {
    // The subscribe message follows the acknowledgement; a job dispatched before it is missed.
    socket.connected.then(() => received.push({ connected: true }));
    const acknowledged = await received.waitFor((item) => item.connected, timeoutMs);
    expect(acknowledged, `the server did not acknowledge the connection within ${timeoutMs} ms`);
    let job = null;
    for (let attempt = 1; attempt <= DISPATCH_ATTEMPTS && job === null; attempt += 1) {
      const candidate = await dispatch();
      const first = await received.waitFor((event) => event.worker?.id === candidate.id, FIRST_EVENT_MS);
      if (first) job = candidate;
    }
    expect(job !== null, `no event for any of ${DISPATCH_ATTEMPTS} jobs dispatched after subscribing`);
    const ofJob = (event) => event.worker?.id === job.id;
    const terminal = await received.waitFor((event) => ofJob(event) && event.kind === "COMPLETED", timeoutMs);
    const kinds = received.items.filter(ofJob).map((event) => event.kind);
    expect(terminal, `no COMPLETED event for job ${job.id}; got ${kinds.join(", ")}`);
    expect(terminal.worker.status === "CONCLUIDO", `COMPLETED with job ${job.id} ${terminal.worker.status}`);
    return { job, detail: `job ${job.id}: ${kinds.join(" -> ")}` };
  } finally {
    stop();
  }
}

/** taskStatus of a finished job: its state at once (SUCCESS, the row CONCLUIDO), then complete. */
export async function checkTaskStatus(socket, job, timeoutMs) {
  const { received, stop } = collect(
    socket.client,
    { query: TASK_STATUS, variables: { taskId: job.taskId } },
    (data) => data.taskStatus,
  );
  try {
    const completed = await received.waitFor((item) => item.completed, timeoutMs);
    const states = received.items.filter((item) => !item.completed);
    expect(completed, `the subscription did not complete; got ${JSON.stringify(states)}`);
    expect(states.length > 0, "the subscription completed without sending anything");
    const last = states.at(-1);
    expect(last.taskId === job.taskId, `the last state is of task ${last.taskId}, not ${job.taskId}`);
    expect(last.state === "SUCCESS", `the last state is ${last.state}: ${JSON.stringify(states)}`);
    expect(last.worker?.id === job.id, `the last state is not of job ${job.id}: ${JSON.stringify(last)}`);
    expect(last.worker.status === "CONCLUIDO", `job ${job.id} is ${last.worker.status}, not CONCLUIDO`);
    return `${states.map((state) => state.state).join(" -> ")}, job ${job.id} CONCLUIDO, completed`;
  } finally {
    stop();
  }
}
