// Why a queued job is not running yet and its place in its queue. The reason changes without any
// event on the job (a worker comes up, a limit is raised), so it is read again every few seconds
// while the job stays queued.
import { html, useEffect } from "./html.js";
import { useQuery } from "./api.js";

const WAITING = "query Waiting($id: Int!) { worker(id: $id) { id waitingReason queuePosition } }";
const REFRESH_MS = 5000;

export const WAITING_LABELS = {
  QUEUED: "Na fila, atrás de outros",
  QUEUE_PAUSED: "Fila pausada",
  CONCURRENCY_LIMIT: "Automação no limite de execuções simultâneas",
  RETRY_BACKOFF: "Aguardando a próxima tentativa",
  NO_PROCESS_ON_QUEUE: "Nenhum processo ativo atende a fila ou a automação",
  AUTOMATION_DISABLED: "Automação desativada",
};

/** The waiting reason and queue position of a queued job (nothing for any other status). */
export function WaitingNote({ job }) {
  const queued = job.status === "AGENDADO";
  const answer = useQuery(queued ? WAITING : null, { id: job.id }, [job.id, job.status, job.updatedAt, job.priority]);
  useEffect(() => {
    if (!queued) return undefined;
    const timer = setInterval(() => answer.reload(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [queued, job.id]);
  const w = answer.data?.worker;
  if (!queued || !w || !w.waitingReason) return null;
  return html`<span class="waiting" data-field="waiting" data-reason=${w.waitingReason}>
    <strong>Aguardando:</strong> ${WAITING_LABELS[w.waitingReason] || w.waitingReason}${w.queuePosition ? html` · <span data-field="queue-position">${w.queuePosition}º na fila</span>` : null}
  </span>`;
}
