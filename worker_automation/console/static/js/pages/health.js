// One automation's health over the last 30 days: finished jobs per day (stacked bars: completed,
// failed, cancelled), success rate and run-time percentiles, read again when one of its jobs ends.
import { html, useMemo } from "../html.js";
import { useQuery, useSubscription } from "../api.js";
import { formatMs, formatNumber } from "../format.js";
import { ErrorNote, Loading, Section, throttle } from "../ui.js";

const DAYS = 30;
const HEALTH = `query Health($automation: String!, $days: Int!) {
  automationHealth(automationType: $automation, days: $days) { day completed failed cancelled successRate p50Ms p95Ms }
}`;
const NAME = "query Name { automations { key displayName } }";
const ENDED = "subscription Ended($automation: String) { workerEvents(filter: { automationType: $automation }) { kind } }";
const ENDING = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
const PARTS = [
  ["completed", "Concluídos", "#1b7f3b"],
  ["failed", "Falhas", "#b3261e"],
  ["cancelled", "Cancelados", "#8a8f98"],
];

function rate(value) {
  return value == null ? "—" : `${(value * 100).toFixed(1)}%`;
}

/** Stacked bars per day, drawn as SVG (no library): the tallest day fills the height. */
function DayBars({ days }) {
  const width = 720, height = 200, gap = 2;
  const most = Math.max(1, ...days.map((d) => d.completed + d.failed + d.cancelled));
  const step = width / days.length;
  return html`<svg class="health-chart" style="width: 100%; height: auto; max-height: 260px" viewBox=${`0 0 ${width} ${height + 18}`} role="img"
      aria-label=${`Trabalhos terminados por dia nos últimos ${days.length} dias: concluídos, falhas e cancelados`}>
    ${days.map((d, i) => {
      let top = height;
      return html`<g key=${d.day} data-day=${d.day}>
        <title>${d.day}: ${d.completed} concluídos, ${d.failed} falhas, ${d.cancelled} cancelados</title>
        ${PARTS.map(([field, , color]) => {
          const h = (d[field] / most) * height;
          top -= h;
          return h > 0 ? html`<rect x=${i * step + gap / 2} y=${top} width=${step - gap} height=${h} fill=${color} />` : null;
        })}
        ${i % 5 === 0 || i === days.length - 1 ? html`<text x=${i * step + step / 2} y=${height + 14} text-anchor="middle" font-size="10">${d.day.slice(5)}</text>` : null}
      </g>`;
    })}
  </svg>
  <p class="legend small">${PARTS.map(([, label, color]) => html`<span><span style=${`display: inline-block; width: .8em; height: .8em; background: ${color}`}></span> ${label}</span> `)}</p>`;
}

export function AutomationHealthPage({ id }) {
  const automation = decodeURIComponent(id || "");
  const variables = useMemo(() => ({ automation, days: DAYS }), [automation]);
  const health = useQuery(HEALTH, variables, [automation]);
  const names = useQuery(NAME, {});
  const reload = useMemo(() => throttle(() => health.reload(), 2000), []);
  const error = useSubscription(ENDED, { automation }, (data) => ENDING.has(data.workerEvents.kind) && reload(), [automation]);
  const name = names.data?.automations.find((a) => a.key === automation)?.displayName || automation;
  const days = health.data?.automationHealth;
  const total = days ? days.reduce((n, d) => n + d.completed + d.failed + d.cancelled, 0) : 0;
  return html`<div class="page">
    <p><a href="#/automacoes">← Automações</a></p>
    <h1>Saúde: ${name}</h1>
    <p class="muted mono">${automation}</p>
    <${ErrorNote} error=${health.error || error} />
    ${!days ? html`<${Loading} />` : html`
      <${Section} title=${`Terminados por dia (últimos ${DAYS} dias, ${formatNumber(total)} no total)`} id="saude-grafico">
        <${DayBars} days=${days} />
      </${Section}>
      <${Section} title="Por dia" id="saude-dias">
        <div class="table-wrap"><table class="grid" data-health=${automation}>
          <caption class="sr-only">Saúde por dia</caption>
          <thead><tr><th scope="col">Dia</th><th scope="col" class="n">Concluídos</th><th scope="col" class="n">Falhas</th>
            <th scope="col" class="n">Cancelados</th><th scope="col" class="n">Taxa de sucesso</th><th scope="col" class="n">p50</th><th scope="col" class="n">p95</th></tr></thead>
          <tbody>${[...days].reverse().map((d) => html`<tr key=${d.day} data-day=${d.day}>
            <th scope="row">${d.day}</th><td class="n" data-field="completed">${formatNumber(d.completed)}</td>
            <td class="n" data-field="failed">${formatNumber(d.failed)}</td><td class="n" data-field="cancelled">${formatNumber(d.cancelled)}</td>
            <td class="n" data-field="rate">${rate(d.successRate)}</td><td class="n">${formatMs(d.p50Ms)}</td><td class="n" data-field="p95">${formatMs(d.p95Ms)}</td>
          </tr>`)}</tbody>
        </table></div>
      </${Section}>`}
  </div>`;
}
