// Queues: live load, broker lengths, pause / resume, clear by scope, purge (typed confirmation).
import { html, useMemo, useState } from "../html.js";
import { gql, useQuery, useSubscription } from "../api.js";
import { SCOPE_LABELS } from "../format.js";
import { ActionButton, ErrorNote, Loading, Num, ProgressBar, Section, TypedConfirm, UnavailableNote, notify, throttle } from "../ui.js";

const broker = (features) =>
  `query Broker { brokerStatus { available queues ${features.priorities ? "priorityLengths { queue priority count }" : ""} } }`;

function ByPriority({ lengths, queue }) {
  const mine = (lengths?.priorityLengths || []).filter((p) => p.queue === queue);
  if (!lengths?.priorityLengths) return "—";
  if (!mine.length) return "nenhuma";
  return mine.map((p) => `prioridade ${p.priority}: ${p.count}`).join(" · ");
}

function loadQuery(features) {
  return `subscription QueueLoad { queueLoad {
    queues { queueName workersCount activeCount pendingCount capacity loadPercent ${features.paused ? "paused" : ""} }
    summary { totalActive totalPending totalCompletedToday totalErrorsToday } } }`;
}

function ClearForm({ queue, onDone }) {
  const [scope, setScope] = useState("QUEUED");
  const run = async () => {
    const data = await gql(
      "mutation Clear($scope: ClearScope!, $queue: String) { clearQueue(scope: $scope, queue: $queue) { cancelled message } }",
      { scope, queue },
    );
    notify(data.clearQueue.message);
    onDone();
  };
  return html`<span class="inline-form">
    <label>Limpar <select value=${scope} onChange=${(e) => setScope(e.target.value)} aria-label=${`Escopo da limpeza de ${queue}`}>
      ${Object.entries(SCOPE_LABELS).map(([value, label]) => html`<option value=${value}>${label}</option>`)}</select></label>
    <${ActionButton} label="Cancelar trabalhos" name=${`limpar-${queue}`} kind="danger" run=${run}
      confirm=${`Cancelar os trabalhos (${SCOPE_LABELS[scope].toLowerCase()}) da fila ${queue}?`} />
  </span>`;
}

export function QueuesPage({ session }) {
  const { features, viewer } = session;
  const [live, setLive] = useState(null);
  const brokerQuery = useMemo(() => broker(features), [features]);
  const brokerState = useQuery(brokerQuery, {});
  const refreshBroker = useMemo(() => throttle(() => brokerState.reload(), 2000), []);
  const query = useMemo(() => loadQuery(features), [features]);
  const error = useSubscription(query, {}, (data) => {
    setLive(data.queueLoad);
    refreshBroker();
  });
  const pause = (queue, paused) => async () => {
    const action = paused ? "resumeQueue" : "pauseQueue";
    const data = await gql(`mutation Pause($queue: String!) { r: ${action}(queue: $queue) { queue paused } }`, { queue });
    // A pause changes no job, so no live push follows it: show the answer at once.
    setLive((old) => old && { ...old, queues: old.queues.map((q) => (q.queueName === data.r.queue ? { ...q, paused: data.r.paused } : q)) });
    notify(paused ? `Fila ${queue} retomada.` : `Fila ${queue} pausada: aceita trabalhos e não roda nenhum.`);
  };
  const lengths = brokerState.data?.brokerStatus;
  return html`<div class="page">
    <h1>Filas</h1>
    <${ErrorNote} error=${error} />
    ${!features.paused ? html`<${UnavailableNote} what="Pausar e retomar filas" />` : null}
    ${!live ? html`<${Loading} />` : html`
      <p class="muted">Em execução: <${Num} value=${live.summary.totalActive} /> · agendados: <${Num} value=${live.summary.totalPending} /> ·
        concluídos hoje: <${Num} value=${live.summary.totalCompletedToday} /> · falhas hoje: <${Num} value=${live.summary.totalErrorsToday} /></p>
      ${lengths && !lengths.available ? html`<p class="error" role="alert">O broker (Redis) não responde: tamanhos indisponíveis.</p>` : null}
      <div class="queues">${live.queues.map((q) => html`<${Section} key=${q.queueName} title=${`Fila ${q.queueName}`} id=${`fila-${q.queueName}`}>
        <dl class="fields compact" data-queue=${q.queueName}>
          <div class="field"><dt>Estado</dt><dd data-field="paused">${features.paused ? (q.paused ? html`<span class="badge badge-paused">Pausada</span>` : "Ativa") : "indisponível"}</dd></div>
          <div class="field"><dt>Em execução</dt><dd>${q.activeCount} de ${q.capacity}</dd></div>
          <div class="field"><dt>Agendados</dt><dd><${Num} value=${q.pendingCount} /></dd></div>
          <div class="field"><dt>Mensagens no broker</dt><dd data-field="broker"><${Num} value=${lengths?.available ? lengths.queues[q.queueName] ?? 0 : null} /></dd></div>
          <div class="field wide"><dt>No broker, por prioridade</dt><dd data-field="priorities"><${ByPriority} lengths=${lengths} queue=${q.queueName} /></dd></div>
        </dl>
        <${ProgressBar} value=${Math.round(q.loadPercent)} label=${`Carga da fila ${q.queueName}`} />
        ${viewer.canManage ? html`<div class="queue-actions" role="group" aria-label=${`Ações na fila ${q.queueName}`}>
          ${features.paused ? html`<${ActionButton} resend=${true} label=${q.paused ? "Retomar" : "Pausar"} name=${`${q.paused ? "retomar" : "pausar"}-${q.queueName}`} run=${pause(q.queueName, q.paused)} />` : null}
          <${ClearForm} queue=${q.queueName} onDone=${() => brokerState.reload()} />
          <${TypedConfirm} label=${`Esvaziar no broker`} word=${q.queueName} prompt=${`Digite ${q.queueName} para apagar as mensagens desta fila no broker (os trabalhos agendados que elas levavam serão cancelados):`}
            run=${async () => {
              const data = await gql("mutation Purge($q: String!) { purgeQueue(queueName: $q, confirm: true) { message cancelled } }", { q: q.queueName });
              const { message, cancelled } = data.purgeQueue;
              notify(cancelled ? `${message}; ${cancelled} trabalho(s) agendado(s) cancelado(s)` : message);
              brokerState.reload();
            }} />
        </div>` : null}
      </${Section}>`)}</div>`}
    ${viewer.canManage ? null : html`<p class="muted">Pausar, limpar e esvaziar filas exige perfil administrador ou diretoria com escrita.</p>`}
  </div>`;
}
