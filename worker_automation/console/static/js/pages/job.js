// One job: every field, context and result, error and traceback, live progress, attempts, audit,
// and the actions on it.
import { html, useEffect, useRef, useState } from "../html.js";
import { eventLog, gql, useQuery, useSubscription } from "../api.js";
import { OUTCOME_LABELS, formatDate, formatDuration, formatMs } from "../format.js";
import { ActionButton, ErrorNote, JsonBlock, Loading, ProgressBar, Section, StatusBadge, UnavailableNote, notify } from "../ui.js";
import { CHOICES } from "./jobs.js";
import { WaitingNote } from "../waiting.js";

const FIELDS = `id taskId status automationType displayName clientName clienteId usuarioId pathFile queue priority
  progress retryCount createdAt updatedAt dataInicio dataFim mensagemErro metadataJson context result machineId
  machine { id name }`;
const JOB = `query Job($id: Int!) { worker(id: $id) { ${FIELDS} } }`;
const STATE = "query JobState($id: Int!) { worker(id: $id) { status queue retryCount } }";
const EVENTS = `subscription JobLive($id: Int!) { workerEvents(filter: { id: $id }) { kind change worker { ${FIELDS} } } }`;
const ATTEMPTS = `query Attempts($id: Int!) { worker(id: $id) { id attempts { number machineId machineName taskId startedAt endedAt outcome error } } }`;
const NEXT_ATTEMPT = "query NextAttempt($id: Int!) { worker(id: $id) { id nextAttemptAt } }";
const AUDIT_FIELDS = "id at actor perfil action target result detail";
const AUDIT = `query JobAudit($target: String!) { auditLog(filter: { target: $target }, perPage: 100) { total items { ${AUDIT_FIELDS} } } }`;
// A service from before the target filter: its latest entries, this job's picked out of them.
const RECENT_AUDIT = `query RecentAudit { auditLog(page: 1, perPage: 100) { items { ${AUDIT_FIELDS} } } }`;

const DURATIONS = `query Typical($a: String!) { durations(automationType: $a) { count p50Ms p95Ms maxMs } }`;

const OPEN = ["AGENDADO", "EXECUTANDO"];

/** How long runs of the same automation took over the last day, to judge this one against. */
function Typical({ automation, features }) {
  const typical = useQuery(features.durations ? DURATIONS : null, { a: automation }, [automation]);
  const d = typical.data?.durations;
  if (!features.durations || !d || !d.count) return null;
  return html`<span class="muted small">Típico de ${automation} nas últimas 24 h (${d.count} ${d.count === 1 ? "execução" : "execuções"}): mediana ${formatMs(d.p50Ms)}, p95 ${formatMs(d.p95Ms)}, máximo ${formatMs(d.maxMs)}</span>`;
}
const RETRYABLE = ["FALHA", "CANCELADO"];

/** A job's run time: none for a job that never started, nor a clock for one no longer running. */
function jobDuration(w) {
  if (!w.dataInicio || (!w.dataFim && w.status !== "EXECUTANDO")) return "—";
  return formatDuration(w.dataInicio, w.dataFim);
}

function Field({ name, children }) {
  return html`<div class="field" data-field=${name}><dt>${name}</dt><dd>${children ?? "—"}</dd></div>`;
}

/** An automatic retry waiting out its backoff: when it may run, counting down each second. */
function NextAttempt({ id, status, retryCount }) {
  const queued = status === "AGENDADO" && retryCount > 0;
  const next = useQuery(queued ? NEXT_ATTEMPT : null, { id: Number(id) }, [status, retryCount]);
  const [now, setNow] = useState(Date.now());
  const at = queued ? next.data?.worker?.nextAttemptAt : null;
  const due = at ? Date.parse(at) : NaN;
  useEffect(() => {
    if (!(due > Date.now())) return undefined;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [due]);
  // No time to wait for (a retry asked for by hand): it runs as soon as its turn comes.
  if (!at) return next.data ? html`<span class="muted" data-countdown>já pode rodar</span>` : null;
  const left = Math.ceil((due - now) / 1000);
  return html`${formatDate(at)} <span class="muted" data-countdown>${left > 0 ? `(em ${left} s)` : "(já pode rodar)"}</span>`;
}

function Attempts({ id, features, resync }) {
  const attempts = useQuery(features.attempts ? ATTEMPTS : null, { id: Number(id) }, [resync]);
  if (!features.attempts) return html`<${UnavailableNote} what="O histórico de tentativas" />`;
  if (attempts.error) return html`<${ErrorNote} error=${attempts.error} />`;
  const items = attempts.data?.worker?.attempts;
  if (!items) return html`<${Loading} />`;
  if (!items.length) return html`<p class="muted">Nenhuma tentativa ainda: o trabalho não foi iniciado.</p>`;
  return html`<ol class="timeline">${items.map((a) => html`<li key=${a.number} data-outcome=${a.outcome || ""}>
    <p><strong>Tentativa ${a.number}</strong> — ${a.outcome ? OUTCOME_LABELS[a.outcome] || a.outcome : "em andamento"} · máquina ${a.machineName || a.machineId || "—"}</p>
    <p class="muted">Início ${formatDate(a.startedAt)} · fim ${formatDate(a.endedAt)} · duração ${formatDuration(a.startedAt, a.endedAt)}</p>
    ${a.error ? html`<p class="err-text">${a.error}</p>` : null}
    <p class="muted mono">task ${a.taskId || "—"}</p></li>`)}</ol>`;
}

function AuditEntries({ id, features, resync }) {
  // Entries about this job name it as their target ("worker:12").
  const target = `worker:${id}`;
  const byTarget = features.auditTarget;
  const query = features.auditLog ? (byTarget ? AUDIT : RECENT_AUDIT) : null;
  const audit = useQuery(query, byTarget ? { target } : {}, [resync, target]);
  if (!features.auditLog) return html`<${UnavailableNote} what="O registro de auditoria" />`;
  if (audit.error) return html`<${ErrorNote} error=${audit.error} />`;
  const log = audit.data?.auditLog;
  if (!log) return html`<${Loading} />`;
  const mine = byTarget ? log.items : log.items.filter((e) => e.target === target);
  if (!mine.length) {
    const none = byTarget ? "Nenhuma ação registrada sobre este trabalho." : "Nenhuma ação sobre este trabalho entre as últimas 100 registradas.";
    return html`<p class="muted">${none}</p>`;
  }
  const more = byTarget && log.total > mine.length ? html`<p class="muted small">As ${mine.length} mais recentes de ${log.total}.</p>` : null;
  return html`<ul class="audit">${mine.map((e) => html`<li key=${e.id} data-audit=${e.action}>${formatDate(e.at)} · <strong>${e.action}</strong> por ${e.actor} — ${e.result}</li>`)}</ul>${more}`;
}

function Actions({ job, choices, answered }) {
  const [target, setTarget] = useState("");
  const [priority, setPriority] = useState(String(job.priority));
  const queues = (choices?.queueLiveStatus?.queues || []).map((q) => q.queueName).filter((q) => q !== job.queue);
  const act = (query, variables, message) => async () => {
    const apply = answered();
    const data = await gql(query, variables);
    notify(message);
    apply(Object.values(data)[0]);
  };
  // After an outage an action is sent again only while the job is still in the same run and in a
  // state the action applies to: had the first send arrived, the job would have moved on.
  const still = (wanted) => async () => {
    const now = (await gql(STATE, { id: job.id })).worker;
    return Boolean(now) && now.retryCount === job.retryCount && wanted(now);
  };
  return html`<div class="job-actions" role="group" aria-label="Ações no trabalho">
    ${OPEN.includes(job.status) ? html`<${ActionButton} label="Cancelar" kind="danger" confirm=${`Cancelar o trabalho ${job.id}?`}
      resend=${still((now) => OPEN.includes(now.status))}
      run=${act(`mutation($id: Int!) { cancelWorker(id: $id) { ${FIELDS} } }`, { id: job.id }, "Trabalho cancelado.")} />` : null}
    ${RETRYABLE.includes(job.status) ? html`<${ActionButton} label="Retentar" resend=${still((now) => RETRYABLE.includes(now.status))}
      run=${act(`mutation($id: Int!) { retryWorker(id: $id) { ${FIELDS} } }`, { id: job.id }, "Trabalho enviado de novo.")} />` : null}
    ${OPEN.includes(job.status) ? html`<span class="inline-form">
      <label>Mover para <select value=${target} onChange=${(e) => setTarget(e.target.value)}>
        <option value="">escolha a fila</option>${queues.map((q) => html`<option value=${q}>${q}</option>`)}</select></label>
      <${ActionButton} label="Mover" disabled=${!target} resend=${still((now) => OPEN.includes(now.status) && now.queue !== target)}
        run=${act(`mutation($id: Int!, $q: String!) { moveWorker(id: $id, targetQueue: $q) { ${FIELDS} } }`, { id: job.id, q: target }, `Trabalho movido para ${target}.`)} />
    </span>` : null}
    ${job.status === "AGENDADO" ? html`<span class="inline-form">
      <label>Prioridade (0 a 9, menor roda antes) <input type="number" min="0" max="9" value=${priority} onInput=${(e) => setPriority(e.target.value)} /></label>
      <${ActionButton} label="Mudar prioridade" name="prioridade" resend=${true}
        disabled=${String(priority).trim() === ""} title=${String(priority).trim() === "" ? "Informe a prioridade (0 a 9)" : undefined}
        run=${act(`mutation($id: Int!, $p: Int!) { reorderWorker(id: $id, newPriority: $p) { ${FIELDS} } }`, { id: job.id, p: Number(priority) }, "Prioridade alterada.")} />
    </span>` : null}
  </div>`;
}

export function JobPage({ session, id }) {
  const jobId = Number(id);
  // Every event carries the whole row: the last one is the newest state there is.
  const log = useRef(null);
  if (log.current === null || log.current.jobId !== jobId) log.current = { jobId, events: eventLog(1) };
  const events = log.current.events;
  const replay = (answer, mark) => {
    const since = events.since(mark);
    return since.length ? { worker: since[since.length - 1] } : answer;
  };
  const job = useQuery(JOB, { id: jobId }, [jobId], { live: { mark: events.mark, replay } });
  const choices = useQuery(session.viewer.canWrite ? CHOICES : null, {});
  const [ends, setEnds] = useState(0);
  const [live, setLive] = useState(false);
  const liveError = useSubscription(EVENTS, { id: jobId }, (data) => {
    const event = data.workerEvents;
    if (event.change === "RESYNC") job.reload();
    else if (event.worker) {
      events.add(event.worker);
      job.setData({ worker: event.worker });
      if (["CLAIMED", "COMPLETED", "FAILED", "CANCELLED"].includes(event.kind)) setEnds((n) => n + 1);
    }
  }, [jobId], () => {
    job.reload();
    setLive(true);
  });
  const w = job.data?.worker;
  const traceback = w?.result && typeof w.result === "object" ? w.result.traceback : null;
  // The traceback has a section of its own, where its lines are readable.
  const shownResult = traceback ? { ...w.result, traceback: "(abaixo, em Erro)" } : w?.result;
  return html`<div class="page" data-live=${live ? "1" : "0"}>
    <p><a href="#/trabalhos">← Trabalhos</a></p>
    <h1>Trabalho #${jobId}${w ? html` — ${w.displayName}` : null}</h1>
    <${ErrorNote} error=${job.error || liveError} />
    ${!w ? (job.error ? null : html`<${Loading} />`) : html`
      <div class="job-head">
        <${StatusBadge} status=${w.status} />
        <${ProgressBar} value=${w.progress} label="Progresso do trabalho" />
        ${w.metadataJson?.message ? html`<span class="muted">${w.metadataJson.message}</span>` : null}
        <${WaitingNote} job=${w} />
      </div>
      ${session.viewer.canWrite ? html`<${Actions} key=${`${w.status}-${w.priority}`} job=${w} choices=${choices.data} answered=${() => {
        // The row as the mutation left it, unless a live event came first: the job may have run on.
        const apply = job.guard();
        return (v) => {
          apply({ worker: v });
          setEnds((n) => n + 1); // the action's own audit entry and attempt, read again
        };
      }} />` : null}
      <div class="two">
        <${Section} title="Dados" id="dados">
          <dl class="fields">
            <${Field} name="Automação">${w.displayName} <span class="mono muted">(${w.automationType})</span><//>
            <${Field} name="Cliente">${w.clientName || (w.clienteId ? `#${w.clienteId}` : null)}<//>
            <${Field} name="Usuário">${w.usuarioId}<//>
            <${Field} name="Fila">${w.queue}<//>
            <${Field} name="Prioridade">${w.priority}<//>
            <${Field} name="Tentativas repetidas">${w.retryCount}<//>
            ${w.status === "AGENDADO" && w.retryCount > 0 ? html`<${Field} name="Próxima tentativa"><${NextAttempt} id=${jobId} status=${w.status} retryCount=${w.retryCount} /><//>` : null}
            <${Field} name="Task id"><span class="mono">${w.taskId}</span><//>
            <${Field} name="Máquina">${w.machine ? `${w.machine.name} (#${w.machine.id})` : w.machineId}<//>
            <${Field} name="Criado em">${formatDate(w.createdAt)}<//>
            <${Field} name="Início">${formatDate(w.dataInicio)}<//>
            <${Field} name="Fim">${formatDate(w.dataFim)}<//>
            <${Field} name="Duração">${jobDuration(w)}<br /><${Typical} automation=${w.automationType} features=${session.features} /><//>
            <${Field} name="Atualizado em">${formatDate(w.updatedAt)}<//>
            <${Field} name="Arquivo">${w.pathFile}<//>
          </dl>
        </${Section}>
        <${Section} title="Entrada e resultado" id="json">
          <h3>Contexto</h3><${JsonBlock} value=${w.context} label="Contexto do trabalho" />
          <h3>Resultado</h3><${JsonBlock} value=${shownResult} label="Resultado do trabalho" />
          <h3>Metadados</h3><${JsonBlock} value=${w.metadataJson} label="Metadados do trabalho" />
        </${Section}>
      </div>
      ${w.mensagemErro || traceback ? html`<${Section} title="Erro" id="erro">
        <p class="err-text" data-field="error">${w.mensagemErro}</p>
        ${traceback ? html`<pre class="json traceback" tabindex="0" aria-label="Traceback">${traceback}</pre>` : null}
      </${Section}>` : null}
      <div class="two">
        <${Section} title="Tentativas" id="tentativas"><${Attempts} id=${jobId} features=${session.features} resync=${ends} /></${Section}>
        <${Section} title="Auditoria" id="auditoria-job"><${AuditEntries} id=${jobId} features=${session.features} resync=${ends} /></${Section}>
      </div>`}
  </div>`;
}
