// The console's only way to the service: GraphQL over HTTP for reads and actions, one websocket
// (graphql-transport-ws) for every live view, and the connection state everyone can watch.
import { createClient } from "graphql-ws";
import { useEffect, useRef, useState } from "./html.js";

const KEY_STORAGE = "wa-console-key";
const GRAPHQL_PATH = new URL("../graphql", window.location.href.replace(/[#?].*$/, "")).pathname;

// GraphQL's own refusals of a number, read before the service sees it, in the operator's words.
const NUMBER_REFUSALS = [
  [/Int cannot represent non 32-bit signed integer value: (.*)$/, (v) => `Número fora do intervalo aceito (de -2147483648 a 2147483647): ${v}`],
  [/Int cannot represent non-integer value: (.*)$/, (v) => `O valor não é um número inteiro: ${v}`],
];

function readable(message) {
  for (const [pattern, say] of NUMBER_REFUSALS) {
    const found = pattern.exec(message || "");
    if (found) return say(found[1]);
  }
  return message;
}

/** An error the API answered with (its message is shown to the operator as is, but for GraphQL's
 * refusals of a number, which are put in Portuguese). */
export class ApiError extends Error {
  constructor(message, code) {
    super(readable(message));
    this.code = code;
  }
}

/** The API does not have this field yet (an older service): the view says "indisponível". */
export class Unavailable extends ApiError {}

// --- the key, kept for this browser tab only ------------------------------------------------

export function storedKey() {
  return window.sessionStorage.getItem(KEY_STORAGE);
}

export function rememberKey(key) {
  window.sessionStorage.setItem(KEY_STORAGE, key);
}

export function forgetKey() {
  window.sessionStorage.removeItem(KEY_STORAGE);
  closeSocket();
}

// A key revoked while the console is open: the shell goes back to sign-in, saying why.
const refusedListeners = new Set();

export function onKeyRefused(listener) {
  refusedListeners.add(listener);
  return () => refusedListeners.delete(listener);
}

// --- a tiny observable store for the connection ----------------------------------------------

const listeners = new Set();
export const connection = { state: "conectando", resyncs: 0, httpDown: false, changes: 0 };

function setConnection(change) {
  Object.assign(connection, change, { changes: connection.changes + 1 });
  for (const listener of listeners) listener({ ...connection });
}

export function useConnection() {
  const [state, setState] = useState({ ...connection });
  useEffect(() => {
    listeners.add(setState);
    // The socket may have changed state between this render and now (a reload reconnects in
    // milliseconds, before effects run): start from the current state, not the rendered one.
    setState((old) => (old.changes === connection.changes ? old : { ...connection }));
    return () => listeners.delete(setState);
  }, []);
  return state;
}

/** A number that grows every time the views must read their data again. */
export function useResync() {
  return useConnection().resyncs;
}

export function requestResync() {
  setConnection({ resyncs: connection.resyncs + 1 });
}

// --- HTTP ------------------------------------------------------------------------------------

function isMissingField(error) {
  const message = error?.message || "";
  return /Cannot query field|Unknown argument|Unknown type|Cannot return null for non-nullable field Query/.test(
    message,
  ) && (error?.extensions?.code ?? "GRAPHQL_VALIDATION_FAILED") === "GRAPHQL_VALIDATION_FAILED";
}

// --- automatic persisted queries ------------------------------------------------------------
// A request is sent as the SHA-256 of its document; the document itself goes only when the service
// does not know that hash yet (after its restart, say), and from then on the hash is enough.
// crypto.subtle exists only in secure contexts (https, localhost): elsewhere documents are sent.

const documentHashes = new Map();
let persistedQueries = Boolean(globalThis.crypto?.subtle);

async function documentHash(query) {
  if (!persistedQueries) return null;
  let hash = documentHashes.get(query);
  if (hash === undefined) {
    try {
      const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(query));
      hash = Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
    } catch {
      hash = null;
    }
    if (documentHashes.size >= 500) documentHashes.clear(); // documents built from input vary
    documentHashes.set(query, hash);
  }
  return hash;
}

// The document for a hash is sent by one caller at a time: a read that misses while another
// caller is already sending that document waits for it, then tries the hash alone again.
const registrations = new Map();

/** Whether an answer to a hash alone asks for the document (or the service has no such thing). */
function wantsDocument(status, body) {
  const first = body?.errors?.[0];
  const code = first?.extensions?.code;
  if (code === "PERSISTED_QUERY_NOT_FOUND") return true;
  if (code === "PERSISTED_QUERY_NOT_SUPPORTED" || (status === 400 && /No GraphQL query/.test(first?.message || ""))) {
    persistedQueries = false; // an older service: send documents from now on
    return true;
  }
  return false;
}

async function post(payload, key) {
  let response;
  try {
    response = await fetch(GRAPHQL_PATH, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-API-Key": key || "" },
      body: JSON.stringify(payload),
    });
  } catch {
    if (!connection.httpDown) setConnection({ httpDown: true });
    throw new ApiError("A API não respondeu. Tentando de novo quando ela voltar.", "NETWORK");
  }
  if (connection.httpDown) setConnection({ httpDown: false });
  try {
    return { status: response.status, body: await response.json() };
  } catch {
    throw new ApiError(`A API respondeu ${response.status} sem um corpo legível.`, "HTTP");
  }
}

/** Wait for the document of ``hash`` if another caller is sending it; whether there was one. */
async function registrationSettled(hash) {
  const pending = registrations.get(hash);
  if (!pending) return false;
  await pending.catch(() => {});
  return true;
}

/** The answer to a document sent by its hash, with the document only if the service asks. */
async function persisted(query, hash, variables, key) {
  const extensions = { persistedQuery: { version: 1, sha256Hash: hash } };
  const hashAlone = () => post({ extensions, variables }, key);
  await registrationSettled(hash);
  let answer = await hashAlone();
  if (!wantsDocument(answer.status, answer.body)) return answer;
  if (await registrationSettled(hash)) {
    answer = await hashAlone();
    if (!wantsDocument(answer.status, answer.body)) return answer;
  }
  const registration = post({ query, variables, extensions }, key);
  registrations.set(hash, registration);
  try {
    return await registration;
  } finally {
    if (registrations.get(hash) === registration) registrations.delete(hash);
  }
}

/** Run one GraphQL document; the data, or an ApiError with the API's own message. */
export async function gql(query, variables = {}, key = storedKey()) {
  const hash = await documentHash(query);
  let answer;
  if (hash) {
    answer = await persisted(query, hash, variables, key);
  } else {
    answer = await post({ query, variables }, key);
  }
  const { body } = answer;
  if (body.errors?.length) {
    const first = body.errors[0];
    if (isMissingField(first)) throw new Unavailable(first.message, "UNAVAILABLE");
    const error = new ApiError(first.message, first.extensions?.code);
    if (body.data) error.partial = body.errors;
    if (error.code === "UNAUTHENTICATED" && key && key === storedKey()) {
      for (const listener of refusedListeners) listener(error.message);
    }
    throw error;
  }
  return body.data;
}

/** Run a document whose fields may fail one by one (aliased bulk actions): { data, errors }. */
export async function gqlPartial(query, variables = {}) {
  try {
    await gql(query, variables);
    return { errors: [] };
  } catch (error) {
    if (error instanceof ApiError && error.partial) return { errors: error.partial };
    throw error;
  }
}

// --- websocket -------------------------------------------------------------------------------

let client = null;
let everConnected = false;
let dropped = false;

function socketUrl() {
  const url = new URL(GRAPHQL_PATH, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}

// The close code of a socket whose key was refused (graphql-ws's Forbidden).
const KEY_REFUSED_CLOSE = 4403;
const KEY_REFUSED_MESSAGE = "A chave foi revogada ou perdeu a permissão. Entre de novo com uma chave válida.";

function isKeyRefused(event) {
  return typeof event === "object" && event !== null && event.code === KEY_REFUSED_CLOSE;
}

function socket() {
  if (client) return client;
  const key = storedKey();
  client = createClient({
    url: socketUrl(),
    connectionParams: { "X-API-Key": key },
    lazy: false,
    keepAlive: 10_000,
    retryAttempts: Infinity,
    // The API closes with 4403 a socket whose key it refuses or whose permission ended (a revoked
    // key, lowered scopes): no reconnection can help, the operator must sign in again.
    shouldRetry: (closed) => !isKeyRefused(closed),
    // Short, capped waits: an API restart should be noticed and recovered from within seconds.
    retryWait: (retries) => new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** retries, 3000))),
    onNonLazyError: () => {},
    on: {
      connecting: () => setConnection({ state: everConnected ? "reconectando" : "conectando" }),
      connected: () => {
        const wasDown = dropped;
        everConnected = true;
        dropped = false;
        setConnection({ state: "conectado", httpDown: false, ...(wasDown ? { resyncs: connection.resyncs + 1 } : {}) });
      },
      closed: (event) => {
        if (!client) return;
        if (isKeyRefused(event)) {
          const refusedWith = storedKey();
          closeSocket();
          if (refusedWith && refusedWith === key) {
            for (const listener of refusedListeners) listener(KEY_REFUSED_MESSAGE);
          }
          return;
        }
        if (everConnected) dropped = true;
        setConnection({ state: everConnected ? "reconectando" : "conectando" });
      },
    },
  });
  return client;
}

export function closeSocket() {
  const current = client;
  client = null;
  everConnected = false;
  dropped = false;
  if (current) current.dispose();
}

/**
 * Subscribe for as long as the caller wants; ``onData`` gets each payload's data. Reconnection
 * is the client's: after it, subscriptions are sent again by themselves.
 */
export function subscribe(query, variables, onData, onError) {
  return socket().subscribe(
    { query, variables },
    {
      next: (result) => {
        if (result.errors?.length) {
          const first = result.errors[0];
          onError?.(isMissingField(first) ? new Unavailable(first.message) : new ApiError(first.message));
        } else onData(result.data);
      },
      error: (error) => {
        const first = Array.isArray(error) ? error[0] : null;
        if (first) onError?.(isMissingField(first) ? new Unavailable(first.message) : new ApiError(first.message));
      },
      complete: () => {},
    },
  );
}

// --- hooks -----------------------------------------------------------------------------------

/**
 * Read ``query`` now, again when ``deps`` change and after every resynchronisation.
 * Returns { data, error, loading, current, reload, setData, guard }: ``current`` says whether
 * ``data`` answers the question asked now (false while another one's rows wait for its answer).
 *
 * ``live`` is for data that events keep current: ``live.mark()`` when a read starts names the
 * events seen so far, and ``live.replay(answer, mark)`` gives the answer with the events that
 * came after that mark applied to it. A read answered after an event that changed what it read
 * would otherwise show the older state until the next event, forever for a finished job.
 * ``guard()``, called when a request starts, gives the setter for its answer (a mutation's): the
 * events that overtook the answer are applied to it the same way.
 */
export function useQuery(query, variables, deps = [], { live = null } = {}) {
  const resyncs = useResync();
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const [tick, setTick] = useState(0);
  const serial = useRef(0);
  // What is asked: a failed read keeps the rows of the same question (an outage shows them,
  // marked stale), never those of another (a refused filter must not look applied).
  const asking = JSON.stringify([query, variables]);
  useEffect(() => {
    if (query == null) return;
    const mine = ++serial.current;
    const seen = live?.mark();
    const asked = asking;
    setState((old) => ({ ...old, loading: true }));
    gql(query, variables).then(
      (data) => mine === serial.current && setState({ data: live ? live.replay(data, seen) : data, error: null, loading: false, asked }),
      (error) => mine === serial.current && setState((old) => (old.asked === asked ? { ...old, error, loading: false } : { data: null, error, loading: false, asked: null })),
    );
  }, [query, resyncs, tick, ...deps]);
  const setData = (data) => setState((s) => ({ ...s, data }));
  const guard = () => {
    const seen = live?.mark();
    return (data) => setData(live ? live.replay(data, seen) : data);
  };
  return { ...state, current: state.asked === asking, reload: () => setTick((t) => t + 1), setData, guard };
}

/**
 * The events a view has applied, numbered, for ``useQuery``'s ``live``: the last ``keep`` of them
 * (a read in flight for longer than they take to arrive may miss the oldest).
 */
export function eventLog(keep = 2000) {
  let count = 0;
  const events = [];
  return {
    add(event) {
      count += 1;
      events.push(event);
      if (events.length > keep) events.splice(0, events.length - keep);
    },
    mark: () => count,
    since: (mark) => events.slice(Math.max(0, events.length - (count - mark))),
  };
}

// The server starts listening for a subscription a moment after it is sent, and a read made at
// the same time may answer before that: what changed in between would be lost. Views that keep
// a list up to date read it once more after this delay, when the subscription is surely live.
const SETTLE_MS = 800;

/**
 * A live subscription held while the component is shown; ``onData`` may change freely.
 * ``onSettled`` runs once the subscription has had time to start listening (read again there).
 */
export function useSubscription(query, variables, onData, deps = [], onSettled = null) {
  const handler = useRef(onData);
  handler.current = onData;
  const settled = useRef(onSettled);
  settled.current = onSettled;
  const [error, setError] = useState(null);
  useEffect(() => {
    if (query == null) return undefined;
    setError(null);
    const dispose = subscribe(query, variables, (data) => handler.current(data), setError);
    const timer = setTimeout(() => settled.current?.(), SETTLE_MS);
    return () => {
      clearTimeout(timer);
      dispose();
    };
  }, [query, ...deps]);
  return error;
}

/**
 * Which optional parts of the API this service has (older services lack some). Each probe is
 * validated but not run (``@skip``). All query probes go in one request and the mutation probes
 * in another; only when one of those is refused are the probes asked one by one.
 */
const PROBES = {
  paused: "q: queueLiveStatus @skip(if: true) { queues { paused } }",
  attempts: "w: worker(id: 1) @skip(if: true) { attempts { number } }",
  throughput: 't: throughput(since: "2026-01-01T00:00:00Z", bucketMinutes: 1) @skip(if: true) { bucketStart }',
  auditLog: "a: auditLog(page: 1, perPage: 1) @skip(if: true) { total }",
  auditTarget: 'at: auditLog(filter: { target: "" }, perPage: 1) @skip(if: true) { total }',
  durations: "d: durations @skip(if: true) { p50Ms }",
  schedules: "s: schedules @skip(if: true) { id }",
  priorities: "b: brokerStatus @skip(if: true) { priorityLengths { priority } }",
};
const MUTATION_PROBES = {
  bulk: "c: cancelWorkers(filter: {}) @skip(if: true) { matched }",
  pause: 'p: pauseQueue(queue: "scan") @skip(if: true) { __typename }',
};

async function probeGroup(probes, keyword, key) {
  const all = `${keyword} { ${Object.values(probes).join(" ")} }`;
  try {
    await gql(all, {}, key);
    return Object.fromEntries(Object.keys(probes).map((name) => [name, true]));
  } catch (error) {
    if (!(error instanceof Unavailable)) throw error;
  }
  const entries = await Promise.all(
    Object.entries(probes).map(([name, field]) =>
      gql(`${keyword} { ${field} }`, {}, key).then(
        () => [name, true],
        (error) => [name, !(error instanceof Unavailable)],
      ),
    ),
  );
  return Object.fromEntries(entries);
}

export async function probeFeatures(key) {
  const [reads, writes] = await Promise.all([probeGroup(PROBES, "query", key), probeGroup(MUTATION_PROBES, "mutation", key)]);
  return { ...reads, ...writes };
}

/** Open the live connection now (it is otherwise opened by the first subscription). */
export function connectEarly() {
  if (storedKey()) socket();
}
