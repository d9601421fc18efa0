// Overview: live load per queue, counts by status, throughput of the last hours, recent failures.
import { html, useEffect, useMemo, useRef, useState } from "../html.js";
import { gql, useQuery, useResync, useSubscription } from "../api.js";
import { STATUSES, STATUS_LABELS, formatDate, formatTime } from "../format.js";
import { ErrorNote, Loading, Num, ProgressBar, Section, UnavailableNote, throttle } from "../ui.js";

const HOURS = 3;

function dashboardQuery(features) {
  return `subscription Overview { dashboard {
    stats { total statusCounts { key count } }
    summary { totalActive totalPending totalCompletedToday totalErrorsToday }
    queues { queueName activeCount pendingCount capacity loadPercent ${features.paused ? "paused" : ""} }
    broker { available queues }
    errors
  } }`;
}

const FAILURES = `query RecentFailures { workers(filter: { status: FALHA }, page: 1, perPage: 6) {
  items { id automationType displayName clientName mensagemErro dataFim queue }
} }`;

const THROUGHPUT = `query Throughput($since: DateTime!) { throughput(since: $since, bucketMinutes: 1) {
  bucketStart completed failed cancelled
} }`;

export function QueueLoadTable({ queues, broker, paused, caption = "Carga por fila" }) {
  return html`<table class="grid">
    <caption class="sr-only">${caption}</caption>
    <thead><tr><th scope="col">Fila</th><th scope="col">Em execução / capacidade</th><th scope="col">Carga</th>
      <th scope="col" class="n">Agendados</th>${broker ? html`<th scope="col" class="n">No broker</th>` : null}
      ${paused ? html`<th scope="col">Estado</th>` : null}</tr></thead>
    <tbody>${queues.map((q) => html`<tr key=${q.queueName} data-queue=${q.queueName}>
      <th scope="row">${q.queueName}</th>
      <td class="n"><span data-field="active">${q.activeCount}</span> / ${q.capacity}</td>
      <td><${ProgressBar} value=${Math.round(q.loadPercent)} label=${`Carga da fila ${q.queueName}`} /></td>
      <td class="n" data-field="pending"><${Num} value=${q.pendingCount} /></td>
      ${broker ? html`<td class="n"><${Num} value=${broker.queues?.[q.queueName]} /></td>` : null}
      ${paused ? html`<td data-field="paused">${q.paused ? html`<span class="badge badge-paused">Pausada</span>` : "Ativa"}</td>` : null}
    </tr>`)}</tbody>
  </table>`;
}

/** One point per minute from ``sinceMs`` to now; minutes the API left out had nothing end. */
function minuteSeries(rows, sinceMs) {
  const byMinute = new Map(rows.map((r) => [Math.floor(Date.parse(r.bucketStart) / 60_000), r]));
  const xs = [], completed = [], failed = [];
  for (let minute = Math.floor(sinceMs / 60_000); minute <= Math.floor(Date.now() / 60_000); minute++) {
    const row = byMinute.get(minute);
    xs.push(minute * 60);
    completed.push(row ? row.completed : 0);
    failed.push(row ? row.failed : 0);
  }
  return [xs, completed, failed];
}

function ThroughputChart({ features, completed, failed }) {
  const holder = useRef(null);
  const chart = useRef(null);
  const [error, setError] = useState(null);
  const [empty, setEmpty] = useState(false);
  const resyncs = useResync();
  const load = useMemo(
    () =>
      throttle(async () => {
        const since = new Date(Date.now() - HOURS * 3600_000).toISOString();
        try {
          const data = await gql(THROUGHPUT, { since });
          setError(null);
          const rows = data.throughput;
          setEmpty(rows.length === 0);
          const series = minuteSeries(rows, Date.parse(since));
          const { default: uPlot } = await import("uplot");
          if (!holder.current) return;
          if (!chart.current) {
            chart.current = new uPlot(
              {
                width: Math.max(holder.current.clientWidth, 320),
                height: 220,
                tzDate: (ts) => new Date(ts * 1000),
                scales: { x: { time: true } },
                axes: [{ values: (u, ticks) => ticks.map((t) => formatTime(t * 1000)) }, {}],
                series: [
                  { label: "Minuto", value: (u, v) => (v == null ? "—" : formatDate(v * 1000)) },
                  { label: "Concluídos", stroke: "#1b7f3b", width: 2, fill: "rgba(27,127,59,0.08)" },
                  { label: "Falhas", stroke: "#b3261e", width: 2 },
                ],
              },
              series,
              holder.current,
            );
          } else chart.current.setData(series);
        } catch (failure) {
          setError(failure);
        }
      }, 5000),
    [],
  );
  useEffect(() => {
    if (features.throughput) load();
  }, [completed, failed, resyncs]);
  useEffect(() => () => chart.current?.destroy(), []);
  if (!features.throughput) return html`<${UnavailableNote} what="O gráfico de vazão" />`;
  return html`<div>
    <${ErrorNote} error=${error} />
    <div ref=${holder} class="chart" role="img" aria-label=${`Trabalhos concluídos e com falha por minuto nas últimas ${HOURS} horas`}></div>
    ${empty ? html`<p class="muted">Nenhum trabalho terminou nas últimas ${HOURS} horas.</p>` : null}
  </div>`;
}

export function OverviewPage({ session }) {
  const { features } = session;
  const [board, setBoard] = useState(null);
  const query = useMemo(() => dashboardQuery(features), [features]);
  const error = useSubscription(query, {}, (data) => setBoard(data.dashboard));
  const counts = useMemo(() => Object.fromEntries((board?.stats?.statusCounts || []).map((c) => [c.key, c.count])), [board]);
  const failures = useQuery(FAILURES, {}, [counts.FALHA]);
  return html`<div class="page">
    <h1>Visão geral</h1>
    <${ErrorNote} error=${error} />
    ${!board ? html`<${Loading} />` : html`
      <section aria-labelledby="counts-title" class="counts">
        <h2 id="counts-title" class="sr-only">Trabalhos por situação</h2>
        <a class="count total" href="#/trabalhos"><span class="label">Total</span><span class="value" data-count="total"><${Num} value=${board.stats?.total} /></span></a>
        ${STATUSES.map((s) => html`<a class=${`count count-${s}`} href=${`#/trabalhos?status=${s}`}>
          <span class="label">${STATUS_LABELS[s]}</span><span class="value" data-count=${s}><${Num} value=${counts[s] ?? 0} /></span></a>`)}
        <p class="today">Hoje: <${Num} value=${board.summary?.totalCompletedToday} /> concluídos, <${Num} value=${board.summary?.totalErrorsToday} /> com falha.</p>
      </section>
      <${Section} title="Carga das filas, ao vivo" id="carga">
        <div class="table-wrap"><${QueueLoadTable} queues=${board.queues} broker=${board.broker?.available ? board.broker : null} paused=${features.paused} /></div>
        ${board.errors && Object.keys(board.errors).length ? html`<p class="error" role="alert">Seções indisponíveis: ${Object.entries(board.errors).map(([k, v]) => `${k}: ${v}`).join("; ")}</p>` : null}
      </${Section}>
      <div class="two">
        <${Section} title=${`Vazão: concluídos e falhas por minuto (últimas ${HOURS} h)`} id="vazao">
          <${ThroughputChart} features=${features} completed=${counts.CONCLUIDO} failed=${counts.FALHA} />
        </${Section}>
        <${Section} title="Falhas recentes" id="falhas">
          <${ErrorNote} error=${failures.error} />
          ${failures.data ? (failures.data.workers.items.length ? html`<ul class="failures">${failures.data.workers.items.map((w) => html`<li key=${w.id}>
              <a href=${`#/trabalhos/${w.id}`}>#${w.id} ${w.displayName}</a> <span class="muted">${formatDate(w.dataFim)}${w.clientName ? ` · ${w.clientName}` : ""}</span>
              <p class="err-text">${w.mensagemErro || "Sem mensagem"}</p></li>`)}</ul>` : html`<p class="muted">Nenhuma falha registrada.</p>`) : html`<${Loading} />`}
        </${Section}>
      </div>`}
  </div>`;
}
