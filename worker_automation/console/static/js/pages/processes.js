// Processes: every Celery pool worker (it answers inspect) and dedicated machine (its subscription
// is open) that runs jobs, live: the processes subscription pushes a new list when one appears,
// changes or goes, so nothing here polls.
import { html, useState } from "../html.js";
import { useSubscription } from "../api.js";
import { formatDate } from "../format.js";
import { ErrorNote, Loading, Section } from "../ui.js";

const FIELDS = "name kind queues concurrency runningJobIds status lastSeenAt machineId";
const LIVE = `subscription Processes { processes { ${FIELDS} } }`;

// The status badges reuse the job colours: up, silent (not heard from), gone.
const STATUS = {
  ONLINE: ["Ativo", "badge-CONCLUIDO"],
  SILENT: ["Sem resposta", "badge-EXECUTANDO"],
  GONE: ["Encerrado", "badge-CANCELADO"],
};
const KIND = { POOL: "Pool Celery", MACHINE: "Máquina dedicada" };

function Running({ ids }) {
  if (!ids.length) return html`<span class="muted">nenhum</span>`;
  return html`${ids.map((id, i) => html`${i ? ", " : ""}<a href=${`#/trabalhos/${id}`}>#${id}</a>`)}`;
}

export function ProcessesPage() {
  const [processes, setProcesses] = useState(null);
  const error = useSubscription(LIVE, {}, (data) => setProcesses(data.processes));
  const online = processes ? processes.filter((p) => p.status === "ONLINE").length : 0;
  return html`<div class="page">
    <h1>Processos</h1>
    <p class="muted">Quem roda trabalhos agora: workers Celery de cada fila (respondem ao inspect) e máquinas dedicadas (com a assinatura aberta). Atualizado ao vivo.</p>
    <${ErrorNote} error=${error} />
    <${Section} title=${processes ? `${online} ativo(s) de ${processes.length}` : "Processos"} id="lista-processos">
      ${!processes ? html`<${Loading} />` : processes.length === 0 ? html`<p class="muted" data-field="no-processes">Nenhum processo: nenhum worker respondeu e nenhuma máquina se conectou.</p>` : html`
      <div class="table-wrap"><table class="grid">
        <caption class="sr-only">Processos que rodam trabalhos</caption>
        <thead><tr><th scope="col">Nome</th><th scope="col">Tipo</th><th scope="col">Situação</th><th scope="col">Filas</th>
          <th scope="col">Simultâneos</th><th scope="col">Rodando</th><th scope="col">Visto em</th></tr></thead>
        <tbody>${processes.map((p) => {
          const [label, badge] = STATUS[p.status] || [p.status, ""];
          return html`<tr key=${`${p.kind}-${p.name}`} data-process=${p.name} data-status=${p.status}>
            <th scope="row" class="mono">${p.name}</th><td>${KIND[p.kind] || p.kind}</td>
            <td><span class=${`badge ${badge}`}>${label}</span></td>
            <td>${p.queues.join(", ") || "—"}</td><td>${p.concurrency ?? "—"}</td>
            <td data-field="running"><${Running} ids=${p.runningJobIds} /></td>
            <td>${formatDate(p.lastSeenAt)}</td>
          </tr>`;
        })}</tbody>
      </table></div>`}
    </${Section}>
  </div>`;
}
