// How values are shown: pt-BR words and dates in the service's time zone (WA_TIMEZONE).

let zone = "America/Sao_Paulo";
let dateTime = null;
let timeOnly = null;

export function setTimeZone(name) {
  zone = name || zone;
  dateTime = new Intl.DateTimeFormat("pt-BR", { timeZone: zone, dateStyle: "short", timeStyle: "medium" });
  timeOnly = new Intl.DateTimeFormat("pt-BR", { timeZone: zone, hour: "2-digit", minute: "2-digit" });
}
setTimeZone(zone);

export function timeZone() {
  return zone;
}

export function formatDate(value) {
  if (!value) return "—";
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : dateTime.format(date);
}

export function formatTime(value) {
  return timeOnly.format(value instanceof Date ? value : new Date(value));
}

export function formatDuration(startValue, endValue) {
  if (!startValue) return "—";
  const ms = (endValue ? new Date(endValue) : new Date()) - new Date(startValue);
  if (!(ms >= 0)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function formatMs(ms) {
  if (ms == null) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toLocaleString("pt-BR", { maximumFractionDigits: 1 })} s`;
  return `${Math.round(ms / 60_000)} min`;
}

export const STATUS_LABELS = {
  AGENDADO: "Agendado",
  EXECUTANDO: "Executando",
  CONCLUIDO: "Concluído",
  FALHA: "Falha",
  CANCELADO: "Cancelado",
};
export const STATUSES = Object.keys(STATUS_LABELS);
// How a run (attempt) ended: a job state, or sent back to a queue.
export const OUTCOME_LABELS = { ...STATUS_LABELS, REENFILEIRADO: "Reenfileirada" };

export const SCOPE_LABELS = { ALL: "Todos os abertos", QUEUED: "Só agendados", RUNNING: "Só em execução" };

export function formatNumber(value) {
  return value == null ? "—" : Number(value).toLocaleString("pt-BR");
}

export function prettyJson(value) {
  if (value === null || value === undefined) return "—";
  return JSON.stringify(value, null, 2);
}
