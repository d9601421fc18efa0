// Automations: fuzzy search of the catalogue, running / queued counts, and their run-time settings.
import { html, useEffect, useMemo, useState } from "../html.js";
import { gql, useQuery, useSubscription } from "../api.js";
import { ActionButton, ErrorNote, Loading, Num, Section, notify, throttle } from "../ui.js";

const CATALOGUE = "query Catalogue { automations { key displayName category queue maxConcurrentJobs devMode enabled maxAttempts retryBackoffSeconds timeoutSeconds requiresSelenium description } }";
const SAVE = `mutation Settings($key: String!, $limit: Int, $dev: Boolean, $enabled: Boolean, $attempts: Int, $backoff: Int, $timeout: Float) {
  updateAutomationSettings(key: $key, maxConcurrentJobs: $limit, devMode: $dev, enabled: $enabled, maxAttempts: $attempts, retryBackoffSeconds: $backoff, timeoutSeconds: $timeout) { key }
}`;
const SEARCH = "query Search($q: String) { searchAutomations(q: $q) { count results { key score } } }";
const EVENTS = "subscription Counts { workerEvents { kind } }";
// Counts for the automations on screen, two aliases each, in requests under the alias limit.
const PER_REQUEST = 12;

async function countsFor(keys) {
  const counts = {};
  for (let start = 0; start < keys.length; start += PER_REQUEST) {
    const part = keys.slice(start, start + PER_REQUEST);
    const body = part.map((key, i) => `r${i}: workers(filter: { automationType: ${JSON.stringify(key)}, status: EXECUTANDO }, perPage: 1) { total }
      q${i}: workers(filter: { automationType: ${JSON.stringify(key)}, status: AGENDADO }, perPage: 1) { total }`).join("\n");
    const data = await gql(`query Counts { ${body} }`);
    part.forEach((key, i) => { counts[key] = { running: data[`r${i}`].total, queued: data[`q${i}`].total }; });
  }
  return counts;
}

function Settings({ automation, onSaved }) {
  const [limit, setLimit] = useState(String(automation.maxConcurrentJobs));
  const [dev, setDev] = useState(automation.devMode);
  const [enabled, setEnabled] = useState(automation.enabled);
  const [attempts, setAttempts] = useState(String(automation.maxAttempts));
  const [backoff, setBackoff] = useState(String(automation.retryBackoffSeconds));
  // Empty: no time limit (sent as 0).
  const [timeout, setTimeout_] = useState(automation.timeoutSeconds == null ? "" : String(automation.timeoutSeconds));
  // Only what the operator changed is sent (the API keeps what is omitted): a value another
  // operator changed since this row was shown is not put back to what the row showed.
  const changed = (value, shown) => (value === shown ? undefined : value);
  const run = async () => {
    const seconds = timeout.trim() === "" ? 0 : Number(timeout);
    await gql(SAVE, {
      key: automation.key,
      limit: changed(Number(limit), automation.maxConcurrentJobs),
      dev: changed(dev, automation.devMode),
      enabled: changed(enabled, automation.enabled),
      attempts: changed(Number(attempts), automation.maxAttempts),
      backoff: changed(Number(backoff), automation.retryBackoffSeconds),
      timeout: changed(seconds, automation.timeoutSeconds == null ? 0 : automation.timeoutSeconds),
    });
    notify(`Configuração de ${automation.displayName} salva.`);
    onSaved();
  };
  return html`<span class="inline-form">
    <label>Limite <input type="number" min="1" class="narrow" value=${limit} onInput=${(e) => setLimit(e.target.value)} /></label>
    <label><input type="checkbox" checked=${dev} onChange=${(e) => setDev(e.target.checked)} /> Em desenvolvimento</label>
    <label><input type="checkbox" checked=${enabled} onChange=${(e) => setEnabled(e.target.checked)} /> Habilitada</label>
    <label>Tentativas <input type="number" min="1" max="100" class="narrow" name="tentativas" value=${attempts} onInput=${(e) => setAttempts(e.target.value)} /></label>
    <label>Espera (s) <input type="number" min="0" class="narrow" name="espera" value=${backoff} onInput=${(e) => setBackoff(e.target.value)} /></label>
    <label>Tempo máx. (s) <input type="number" min="0" step="any" class="narrow" name="tempo-maximo" placeholder="sem" value=${timeout} onInput=${(e) => setTimeout_(e.target.value)} /></label>
    <${ActionButton} label="Salvar" name=${`salvar-${automation.key}`} run=${run} resend=${true} />
  </span>`;
}

export function AutomationsPage({ session }) {
  const { viewer } = session;
  const [q, setQ] = useState("");
  const [typed, setTyped] = useState("");
  const catalogue = useQuery(CATALOGUE, {});
  const search = useQuery(q ? SEARCH : null, { q }, [q]);
  const [counts, setCounts] = useState({});
  const [countsError, setCountsError] = useState(null);
  const shown = useMemo(() => {
    const all = catalogue.data?.automations || [];
    if (!q) return all;
    const byKey = Object.fromEntries(all.map((a) => [a.key, a]));
    return (search.data?.searchAutomations.results || []).map((r) => ({ ...byKey[r.key], score: r.score })).filter((a) => a.key);
  }, [catalogue.data, search.data, q]);
  const keys = shown.map((a) => a.key).join(",");
  const loadCounts = useMemo(() => throttle((list) => countsFor(list).then((c) => { setCounts(c); setCountsError(null); }, setCountsError), 2000), []);
  useEffect(() => { if (keys) loadCounts(keys.split(",")); }, [keys]);
  useSubscription(EVENTS, {}, () => keys && loadCounts(keys.split(",")), [keys]);
  useEffect(() => {
    const timer = setTimeout(() => setQ(typed.trim()), 250);
    return () => clearTimeout(timer);
  }, [typed]);
  return html`<div class="page">
    <h1>Automações</h1>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label class="grow">Buscar (aproximada) <input type="search" value=${typed} placeholder="ex.: certidao federal, sefaz, fgts" onInput=${(e) => setTyped(e.target.value)} /></label>
    </form>
    <${ErrorNote} error=${catalogue.error || search.error || countsError} />
    ${!catalogue.data ? html`<${Loading} />` : html`<${Section} title=${q ? `${shown.length} resultado(s) para “${q}”` : `${shown.length} automações`} id="catalogo">
      <div class="table-wrap"><table class="grid">
        <caption class="sr-only">Automações</caption>
        <thead><tr><th scope="col">Automação</th><th scope="col">Categoria</th><th scope="col">Fila</th>
          <th scope="col" class="n">Executando</th><th scope="col" class="n">Agendados</th>
          ${q ? html`<th scope="col" class="n">Relevância</th>` : null}<th scope="col">Configuração</th></tr></thead>
        <tbody>${shown.map((a) => html`<tr key=${a.key} data-automation=${a.key}>
          <th scope="row"><a href=${`#/automacoes/${encodeURIComponent(a.key)}`} title="Saúde nos últimos 30 dias">${a.displayName}</a><br /><span class="mono muted">${a.key}</span></th>
          <td>${a.category}</td><td>${a.queue}</td>
          <td class="n"><${Num} value=${counts[a.key]?.running} /></td><td class="n"><${Num} value=${counts[a.key]?.queued} /></td>
          ${q ? html`<td class="n">${a.score}</td>` : null}
          <td class="settings">${viewer.canManage ? html`<${Settings} key=${`${a.key}-${a.maxConcurrentJobs}-${a.devMode}-${a.enabled}-${a.maxAttempts}-${a.retryBackoffSeconds}-${a.timeoutSeconds}`} automation=${a} onSaved=${() => catalogue.reload()} />`
            : html`limite ${a.maxConcurrentJobs} · ${a.maxAttempts} tentativa(s)${a.timeoutSeconds == null ? "" : ` · tempo máx. ${a.timeoutSeconds} s`}${a.devMode ? " · em desenvolvimento" : ""}${a.enabled ? "" : " · desabilitada"}`}</td>
        </tr>`)}</tbody>
      </table></div>
    </${Section}>`}
  </div>`;
}
