// Audit log: who did what, when, to which target, and how it ended.
import { html, useMemo, useState } from "../html.js";
import { useQuery } from "../api.js";
import { formatDate } from "../format.js";
import { ErrorNote, JsonBlock, Loading, Pager, Section, UnavailableNote } from "../ui.js";

const PER_PAGE = 50;
const LIST = `query Audit($filter: AuditFilter, $page: Int!, $perPage: Int!) {
  auditLog(filter: $filter, page: $page, perPage: $perPage) { total page pages items { id at actor perfil action target result detail } } }`;

export function AuditPage({ session }) {
  const { features } = session;
  const [draft, setDraft] = useState({ actor: "", action: "", since: "" });
  const [filter, setFilter] = useState({});
  const [page, setPage] = useState(1);
  const variables = useMemo(() => ({ filter, page, perPage: PER_PAGE }), [filter, page]);
  const list = useQuery(features.auditLog ? LIST : null, variables, [variables]);
  if (!features.auditLog) return html`<div class="page"><h1>Auditoria</h1><${UnavailableNote} what="O registro de auditoria" /></div>`;
  const apply = (e) => {
    e.preventDefault();
    const next = {};
    if (draft.actor.trim()) next.actor = draft.actor.trim();
    if (draft.action.trim()) next.action = draft.action.trim();
    if (draft.since) next.since = draft.since; // read in the service's zone, as every date shown
    setFilter(next);
    setPage(1);
  };
  const log = list.data?.auditLog;
  return html`<div class="page">
    <h1>Auditoria</h1>
    <form class="filters" onSubmit=${apply} aria-label="Filtros da auditoria">
      <label>Quem <input value=${draft.actor} onInput=${(e) => setDraft({ ...draft, actor: e.target.value })} /></label>
      <label>Ação <input value=${draft.action} placeholder="ex.: cancel" onInput=${(e) => setDraft({ ...draft, action: e.target.value })} /></label>
      <label>Desde <input type="datetime-local" value=${draft.since} onInput=${(e) => setDraft({ ...draft, since: e.target.value })} /></label>
      <button class="btn primary" type="submit">Filtrar</button>
    </form>
    <${ErrorNote} error=${list.error} />
    <${Section} title="Registro" id="registro">
      ${!log ? (list.error ? null : html`<${Loading} />`) : html`
      <div class="table-wrap"><table class="grid">
        <caption class="sr-only">Registro de auditoria</caption>
        <thead><tr><th scope="col">Quando</th><th scope="col">Quem</th><th scope="col">Perfil</th><th scope="col">Ação</th>
          <th scope="col">Alvo</th><th scope="col">Resultado</th><th scope="col">Detalhe</th></tr></thead>
        <tbody>${log.items.map((e) => html`<tr key=${e.id} data-entry=${e.id}>
          <td>${formatDate(e.at)}</td><td>${e.actor}</td><td>${e.perfil || "—"}</td><td class="mono">${e.action}</td>
          <td class="mono">${e.target || "—"}</td><td>${e.result}</td>
          <td>${e.detail ? html`<details><summary>ver</summary><${JsonBlock} value=${e.detail} label="Detalhe" /></details>` : "—"}</td>
        </tr>`)}</tbody>
      </table></div>
      <${Pager} page=${page} pages=${log.pages} total=${log.total} onPage=${setPage} noun="registros" />`}
    </${Section}>
  </div>`;
}
