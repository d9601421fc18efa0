// Jobs: every filter of `workers`, pages, rows kept live by `workerEvents`, bulk cancel / retry.
import { html, useEffect, useMemo, useRef, useState } from "../html.js";
import { eventLog, gql, gqlPartial, useQuery, useSubscription } from "../api.js";
import { STATUSES, STATUS_LABELS, formatDate, formatDuration, formatNumber } from "../format.js";
import { ActionButton, ErrorNote, Loading, Pager, ProgressBar, StatusBadge, notify } from "../ui.js";

const PER_PAGE = 25;
const ROW = "id taskId status automationType displayName clientName clienteId usuarioId queue priority progress retryCount createdAt dataInicio dataFim mensagemErro";
const listQuery = (filter) => `query Jobs($page: Int!, $perPage: Int!) {
  workers(filter: ${filterLiteral(filter)}${orderLiteral(filter.orderBy)}, page: $page, perPage: $perPage) { total page perPage pages items { ${ROW} } } }`;
const EVENTS = `subscription JobEvents { workerEvents { id kind change worker { ${ROW} } } }`;
export const CHOICES = "query Choices { automations { key displayName queue } queueLiveStatus { queues { queueName } } }";
const FILTER_FIELDS = ["status", "queue", "automationType", "clienteId", "usuarioId", "taskId", "q", "createdFrom", "createdTo"];
// The sortable columns: the list's order travels with the filter as ``orderBy`` ("duration:asc"),
// so the address, the form and the live updates carry it like any filter.
const SORTS = { created: "CREATED_AT", finished: "FINISHED_AT", duration: "DURATION", priority: "PRIORITY" };

/** ``, orderBy: {...}`` for an order such as "duration:asc" (nothing for the default order). */
function orderLiteral(order) {
  const [name, direction] = String(order || "").split(":");
  if (!SORTS[name]) return "";
  return `, orderBy: { field: ${SORTS[name]}, direction: ${direction === "asc" ? "ASC" : "DESC"} }`;
}

/** A header that sorts the list by its column: descending first, then ascending. */
function SortHeader({ label, name, filter, onSort, className }) {
  const [current, direction] = String(filter.orderBy || "").split(":");
  const active = current === name;
  const sort = active ? (direction === "asc" ? "ascending" : "descending") : "none";
  const next = active && direction !== "asc" ? `${name}:asc` : `${name}:desc`;
  return html`<th scope="col" class=${className} aria-sort=${sort}>
    <button class="sort" type="button" data-sort=${name} onClick=${() => onSort(next)}>${label}${active ? (direction === "asc" ? " ▲" : " ▼") : ""}</button></th>`;
}
// Aliased mutations per request: well under the API's alias limit.
const CHUNK = 20;

/**
 * The filter written into the document rather than passed as a variable: a variable would have
 * to name the filter's input type, and the document then works only with one version of the API.
 */
export function filterLiteral(filter) {
  const parts = [];
  for (const [name, value] of Object.entries(filter)) {
    if (!FILTER_FIELDS.includes(name) || value == null || value === "") continue;
    if (name === "status") {
      if (STATUSES.includes(value)) parts.push(`status: ${value}`);
    } else if (name === "clienteId" || name === "usuarioId") {
      if (Number.isInteger(value)) parts.push(`${name}: ${value}`);
    } else parts.push(`${name}: ${JSON.stringify(String(value))}`);
  }
  return `{ ${parts.join(", ")} }`;
}

function filterFrom(params) {
  const filter = {};
  for (const name of [...FILTER_FIELDS, "orderBy"]) {
    const value = params.get(name);
    if (value) filter[name] = name === "clienteId" || name === "usuarioId" ? Number(value) : value;
  }
  return filter;
}

function sameFilter(a, b) {
  const canonical = (filter) => JSON.stringify(Object.entries(filter).map(([k, v]) => [k, String(v)]).sort());
  return canonical(a) === canonical(b);
}

function matches(filter, job) {
  return ["status", "queue", "automationType", "clienteId", "usuarioId", "taskId"].every(
    (name) => filter[name] == null || filter[name] === job[name],
  ) && inRange(filter, job.createdAt);
}

/**
 * Whether ``createdAt`` (the API's instant, written in the service's zone with its offset) falls
 * in the filter's creation range, whose ends are wall-clock times of that same zone ("Criado de"
 * inclusive, "Criado até" exclusive): the instant's own wall-clock part is compared with them.
 */
function inRange(filter, createdAt) {
  if (!filter.createdFrom && !filter.createdTo) return true;
  if (!createdAt) return false;
  const local = String(createdAt).slice(0, 19);
  return (!filter.createdFrom || local >= filter.createdFrom) && (!filter.createdTo || local < filter.createdTo);
}

// Kinds of event after which a job may be in a filtered list it was not in before.
const CHANGES_STATUS = ["CLAIMED", "COMPLETED", "FAILED", "CANCELLED", "MOVED"];

/**
 * Whether ``event`` may have brought its job into the set ``filter`` selects: a new job, or one
 * whose status (or queue) just changed while the filter names one. A job updated in any other way
 * was already in the set, on some other page.
 */
function entered(filter, event) {
  const job = event.worker;
  if (event.change === "CREATED" && !job.retryCount) return true;
  const statusChanged = event.change === "CREATED" || CHANGES_STATUS.includes(event.kind);
  return (statusChanged && filter.status != null) || (event.kind === "MOVED" && filter.queue != null)
    || (ENDS.includes(event.kind) && SORTED_BY_END.test(String(filter.orderBy || "")));
}

// Sorted by finish time or by run time, a job that ends takes a new place in the list: one not
// on this page may now belong on it.
const ENDS = ["COMPLETED", "FAILED", "CANCELLED"];
const SORTED_BY_END = /^(finished|duration)(:|$)/;

/** Whether ``job`` comes before ``row`` in the list's order (newest first). */
function sortsBefore(job, row) {
  return job.id > row.id;
}

/**
 * ``workers`` (a page of the list) with ``events`` applied in order: rows changed in place, rows
 * deleted or no longer matching the filter taken out, jobs that came to match it put in their
 * place when it is on this page; ``added`` counts those that belong on an earlier page (the
 * "new jobs" button) or whose match the page cannot tell (a text search).
 */
function applyEvents(workers, events, filter, page) {
  let items = workers.items;
  let total = workers.total;
  let added = 0;
  for (const event of events) {
    const job = event.worker;
    if (!job) continue;
    const at = items.findIndex((row) => row.id === job.id);
    const belongs = event.change !== "DELETED" && matches(filter, job);
    if (at >= 0) {
      items = items.slice();
      if (belongs) items[at] = job;
      else {
        items.splice(at, 1);
        total -= 1;
      }
    } else if (belongs && entered(filter, event)) {
      const place = items.findIndex((row) => sortsBefore(job, row));
      if (filter.q || filter.orderBy || (place === 0 && page > 1)) added += 1;
      else {
        total += 1;
        if (place >= 0 || items.length < PER_PAGE) {
          items = items.slice();
          items.splice(place >= 0 ? place : items.length, 0, job);
          items = items.slice(0, PER_PAGE);
        }
      }
    }
  }
  if (items === workers.items && total === workers.total) return { workers, added };
  return { workers: { ...workers, items, total, pages: Math.max(1, Math.ceil(total / PER_PAGE)) }, added };
}

async function bulk(action, ids) {
  let failures = [];
  for (let start = 0; start < ids.length; start += CHUNK) {
    const part = ids.slice(start, start + CHUNK);
    const body = part.map((id, i) => `a${i}: ${action}(id: ${Number(id)}) { id status }`).join("\n");
    const { errors } = await gqlPartial(`mutation Bulk { ${body} }`);
    failures = failures.concat(errors);
  }
  return { done: ids.length - failures.length, failures };
}

function Filters({ filter, choices, onApply }) {
  const [draft, setDraft] = useState(filter);
  useEffect(() => setDraft(filter), [filter]);
  const set = (name) => (event) => setDraft({ ...draft, [name]: event.target.value });
  const submit = (event) => {
    event.preventDefault();
    const clean = {};
    for (const [k, v] of Object.entries(draft)) if (v !== "" && v != null) clean[k] = k.endsWith("Id") && k !== "taskId" ? Number(v) : String(v).trim();
    onApply(clean);
  };
  const automations = choices?.automations || [];
  const queues = choices?.queueLiveStatus?.queues || [];
  return html`<form class="filters" onSubmit=${submit} aria-label="Filtros">
    <label>Situação <select name="status" value=${draft.status || ""} onChange=${set("status")}>
      <option value="">Todas</option>${STATUSES.map((s) => html`<option value=${s}>${STATUS_LABELS[s]}</option>`)}</select></label>
    <label>Fila <select name="queue" value=${draft.queue || ""} onChange=${set("queue")}>
      <option value="">Todas</option>${queues.map((q) => html`<option value=${q.queueName}>${q.queueName}</option>`)}</select></label>
    <label>Automação <select name="automationType" value=${draft.automationType || ""} onChange=${set("automationType")}>
      <option value="">Todas</option>${automations.map((a) => html`<option value=${a.key}>${a.displayName} (${a.key})</option>`)}</select></label>
    <label>Cliente (id) <input name="clienteId" type="number" min="1" value=${draft.clienteId ?? ""} onInput=${set("clienteId")} /></label>
    <label>Usuário (id) <input name="usuarioId" type="number" min="1" value=${draft.usuarioId ?? ""} onInput=${set("usuarioId")} /></label>
    <label>Task id <input name="taskId" value=${draft.taskId || ""} onInput=${set("taskId")} /></label>
    <label>Criado de <input name="createdFrom" type="datetime-local" value=${draft.createdFrom || ""} onInput=${set("createdFrom")} /></label>
    <label>Criado até <input name="createdTo" type="datetime-local" value=${draft.createdTo || ""} onInput=${set("createdTo")} /></label>
    <label class="grow">Busca <input name="q" type="search" placeholder="task id, automação, cliente, erro, dado do contexto" value=${draft.q || ""} onInput=${set("q")} /></label>
    <button class="btn primary" type="submit">Filtrar</button>
    <button class="btn" type="button" onClick=${() => { setDraft({}); onApply({}); }}>Limpar filtros</button>
  </form>`;
}

export function JobsPage({ session, route }) {
  const canWrite = session.viewer.canWrite;
  const [filter, setFilter] = useState(() => filterFrom(route.params));
  const [page, setPage] = useState(() => Number(route.params.get("page")) || 1);
  const [selected, setSelected] = useState(() => new Set());
  const [fresh, setFresh] = useState(0);
  const [live, setLive] = useState(false);
  const choices = useQuery(CHOICES, {});
  const variables = useMemo(() => ({ page, perPage: PER_PAGE }), [page]);
  const query = useMemo(() => listQuery(filter), [filter]);
  const log = useRef(null);
  if (log.current === null) log.current = eventLog();
  // A read overtaken by events gets them too (the filter and page it was made for).
  const replay = (answer, mark) => {
    const since = log.current.since(mark).filter((e) => e.change !== "RESYNC");
    if (!since.length || !answer?.workers) return answer;
    return { workers: applyEvents(answer.workers, since, filter, page).workers };
  };
  const list = useQuery(query, variables, [variables], { live: { mark: () => log.current.mark(), replay } });
  const pending = useRef([]);
  const frame = useRef(0);
  const listRef = useRef(list);
  listRef.current = list;

  // Each filter and page the operator picks is a step of the browser's history (Back returns to
  // the one before); the address the page was opened with is only written the way it reads.
  const opened = useRef(true);
  useEffect(() => {
    const params = new URLSearchParams({ ...filter, ...(page > 1 ? { page } : {}) });
    const hash = `#/trabalhos${params.toString() ? `?${params}` : ""}`;
    if (window.location.hash !== hash) window.history[opened.current ? "replaceState" : "pushState"](null, "", hash);
    opened.current = false;
    setSelected(new Set());
    setFresh(0);
  }, [filter, page]);

  // The address is the page's state: a hash typed, or reached by going back or forward, applies.
  const shownRoute = useRef(route);
  useEffect(() => {
    if (route === shownRoute.current) return;
    shownRoute.current = route;
    const next = filterFrom(route.params);
    setFilter((old) => (sameFilter(old, next) ? old : next));
    setPage(Number(route.params.get("page")) || 1);
  }, [route]);

  // Events arrive in bursts: apply them once per animation frame, not one render each.
  const flush = () => {
    frame.current = 0;
    const events = pending.current;
    pending.current = [];
    const current = listRef.current.data?.workers;
    if (!current) return;
    if (events.some((e) => e.change === "RESYNC")) {
      listRef.current.reload();
      return;
    }
    const { workers, added } = applyEvents(current, events, filter, page);
    if (added) setFresh((n) => n + added);
    if (workers !== current) listRef.current.setData({ workers });
  };
  const liveError = useSubscription(
    EVENTS,
    {},
    (data) => {
      log.current.add(data.workerEvents);
      pending.current.push(data.workerEvents);
      if (!frame.current) frame.current = window.requestAnimationFrame(flush);
    },
    [],
    () => {
      listRef.current.reload();
      setLive(true);
    },
  );
  useEffect(() => () => frame.current && window.cancelAnimationFrame(frame.current), []);

  const workers = list.data?.workers;
  const ids = workers?.items.map((w) => w.id) || [];
  const allChosen = ids.length > 0 && ids.every((id) => selected.has(id));
  const toggle = (id) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id); else next.add(id);
    setSelected(next);
  };
  const runBulk = (action, verb) => async () => {
    const { done, failures } = await bulk(action, [...selected]);
    notify(`${done} trabalho(s) ${verb}.${failures.length ? ` ${failures.length} recusado(s): ${failures[0].message}` : ""}`, failures.length ? "error" : "ok");
    setSelected(new Set());
  };
  const sortBy = (order) => { setFilter({ ...filter, orderBy: order }); setPage(1); };
  const runFiltered = (action, verb) => async () => {
    const data = await gql(`mutation Bulk { r: ${action}(filter: ${filterLiteral(filter)}) { matched changed } }`);
    notify(`${data.r.changed} de ${data.r.matched} trabalho(s) ${verb}.`);
    list.reload();
  };

  // How many the filter matches, as its list was read: the scale of a bulk action (not said while
  // the list shown is still the previous filter's).
  const matching = workers && list.current ? `os ${formatNumber(workers.total)} trabalho(s)` : "todos os trabalhos";
  return html`<div class="page" data-live=${live ? "1" : "0"}>
    <h1>Trabalhos</h1>
    <${Filters} filter=${filter} choices=${choices.data} onApply=${(f) => { setFilter(f); setPage(1); }} />
    <${ErrorNote} error=${list.error || liveError} />
    ${fresh ? html`<p><button class="btn" type="button" onClick=${() => { setFresh(0); list.reload(); }}>${formatNumber(fresh)} trabalho(s) novo(s) — atualizar a lista</button></p>` : null}
    ${canWrite ? html`<div class="bulk" role="group" aria-label="Ações nos selecionados">
      <span>${selected.size} selecionado(s)</span>
      <${ActionButton} label="Cancelar selecionados" name="cancelar-selecionados" kind="danger" disabled=${!selected.size}
        confirm=${`Cancelar ${selected.size} trabalho(s)?`} run=${runBulk("cancelWorker", "cancelado(s)")} />
      <${ActionButton} label="Retentar selecionados" name="retentar-selecionados" disabled=${!selected.size}
        run=${runBulk("retryWorker", "enviado(s) de novo")} />
      ${session.features.bulk ? html`
        <${ActionButton} label="Cancelar todos do filtro" name="cancelar-filtro" kind="danger" confirm=${`Cancelar os trabalhos abertos (agendados ou em execução) entre ${matching} que atendem ao filtro?`} run=${runFiltered("cancelWorkers", "cancelado(s)")} />
        <${ActionButton} label="Retentar todos do filtro" name="retentar-filtro" confirm=${`Retentar os trabalhos com falha ou cancelados entre ${matching} que atendem ao filtro?`} run=${runFiltered("retryWorkers", "enviado(s) de novo")} />` : null}
    </div>` : null}
    ${!workers ? (list.error ? null : html`<${Loading} />`) : html`
      <div class="table-wrap"><table class="grid jobs" aria-describedby="jobs-count">
        <thead><tr>
          ${canWrite ? html`<th scope="col"><input type="checkbox" aria-label="Selecionar todos desta página" checked=${allChosen}
            onChange=${() => setSelected(allChosen ? new Set() : new Set(ids))} /></th>` : null}
          <th scope="col">#</th><th scope="col">Automação</th><th scope="col">Cliente</th><th scope="col">Situação</th>
          <th scope="col">Progresso</th><th scope="col">Fila</th>
          <${SortHeader} label="Prior." name="priority" className="n" filter=${filter} onSort=${sortBy} />
          <${SortHeader} label="Criado em" name="created" filter=${filter} onSort=${sortBy} />
          <${SortHeader} label="Fim" name="finished" filter=${filter} onSort=${sortBy} />
          <${SortHeader} label="Duração" name="duration" filter=${filter} onSort=${sortBy} />
          <th scope="col">Erro</th>
        </tr></thead>
        <tbody>${workers.items.map((w) => html`<tr key=${w.id} data-id=${w.id} data-status=${w.status}>
          ${canWrite ? html`<td><input type="checkbox" aria-label=${`Selecionar o trabalho ${w.id}`} checked=${selected.has(w.id)} onChange=${() => toggle(w.id)} /></td>` : null}
          <td><a href=${`#/trabalhos/${w.id}`}>${w.id}</a></td>
          <td><span title=${w.automationType}>${w.displayName}</span></td>
          <td>${w.clientName || (w.clienteId ? `#${w.clienteId}` : "—")}</td>
          <td><${StatusBadge} status=${w.status} /></td>
          <td><${ProgressBar} value=${w.progress} label=${`Progresso do trabalho ${w.id}`} /></td>
          <td>${w.queue}</td><td class="n">${w.priority}</td>
          <td>${formatDate(w.createdAt)}</td><td>${formatDate(w.dataFim)}</td>
          <td>${w.dataFim ? formatDuration(w.dataInicio, w.dataFim) : "—"}</td>
          <td class="err-cell" title=${w.mensagemErro || ""}>${w.mensagemErro || ""}</td>
        </tr>`)}</tbody>
      </table></div>
      ${workers.items.length === 0 ? html`<p class="muted">Nenhum trabalho com estes filtros.</p>` : null}
      <p id="jobs-count" class="sr-only">${formatNumber(workers.total)} trabalhos</p>
      <${Pager} page=${page} pages=${workers.pages} total=${workers.total} onPage=${setPage} />`}
  </div>`;
}
