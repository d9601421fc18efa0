// Schedules: recurring dispatches kept by the service (cron), created, switched, run, removed.
import { html, useMemo, useState } from "../html.js";
import { gql, useQuery, useSubscription } from "../api.js";
import { formatDate, timeZone } from "../format.js";
import { ActionButton, ErrorNote, Loading, Section, UnavailableNote, notify, throttle } from "../ui.js";

const SCHEDULE = "id automationType clienteId priority cron timezone enabled nextRunAt lastRunAt lastWorkerId";
const LIST = `query Schedules { schedules { ${SCHEDULE} } }`;
const AUTOMATIONS = "query Names { automations { key displayName } }";
const CREATED = "subscription Fired { workerEvents { change worker { metadataJson } } }";

function CreateForm({ onDone }) {
  const names = useQuery(AUTOMATIONS, {});
  const [form, setForm] = useState({ automationType: "", clienteId: "", context: "{}", priority: "0", cron: "0 6 * * 1-5", timezone: timeZone(), enabled: true });
  const set = (name) => (e) => setForm({ ...form, [name]: e.target.type === "checkbox" ? e.target.checked : e.target.value });
  const run = async () => {
    let context;
    try {
      context = JSON.parse(form.context || "null");
    } catch {
      throw new Error("O contexto não é um JSON válido.");
    }
    if (String(form.priority).trim() === "") throw new Error("Informe a prioridade (0 a 9).");
    const input = {
      automationType: form.automationType,
      clienteId: form.clienteId ? Number(form.clienteId) : null,
      context,
      priority: Number(form.priority),
      cron: form.cron.trim(),
      timezone: form.timezone.trim(),
      enabled: form.enabled,
    };
    await gql("mutation Create($input: ScheduleInput!) { createSchedule(input: $input) { id } }", { input });
    notify("Agendamento criado.");
    onDone();
  };
  return html`<form class="filters" onSubmit=${(e) => e.preventDefault()} aria-label="Novo agendamento">
    <label>Automação <select value=${form.automationType} onChange=${set("automationType")}>
      <option value="">escolha</option>${(names.data?.automations || []).map((a) => html`<option value=${a.key}>${a.displayName} (${a.key})</option>`)}</select></label>
    <label>Cliente (id) <input type="number" min="1" value=${form.clienteId} onInput=${set("clienteId")} /></label>
    <label>Prioridade <input type="number" min="0" max="9" class="narrow" value=${form.priority} onInput=${set("priority")} /></label>
    <label>Cron <input class="mono" value=${form.cron} onInput=${set("cron")} /></label>
    <label>Fuso <input value=${form.timezone} onInput=${set("timezone")} /></label>
    <label class="grow">Contexto (JSON) <input class="mono" value=${form.context} onInput=${set("context")} /></label>
    <label><input type="checkbox" checked=${form.enabled} onChange=${set("enabled")} /> Ativo</label>
    <${ActionButton} label="Criar" kind="primary" disabled=${!form.automationType || !form.cron.trim()} run=${run} />
  </form>`;
}

export function SchedulesPage({ session }) {
  const { features, viewer } = session;
  const list = useQuery(features.schedules ? LIST : null, {});
  // A schedule that fires creates a job carrying its id: read the (short) list again then.
  const refresh = useMemo(() => throttle(() => list.reload(), 1000), []);
  useSubscription(features.schedules ? CREATED : null, {}, (data) => {
    const event = data.workerEvents;
    if (event.change === "RESYNC" || (event.change === "CREATED" && event.worker?.metadataJson?.schedule_id)) refresh();
  });
  if (!features.schedules) return html`<div class="page"><h1>Agendamentos</h1><${UnavailableNote} what="A página de agendamentos" /></div>`;
  const act = (query, variables, message) => async () => {
    await gql(query, variables);
    notify(message);
    list.reload();
  };
  const items = list.data?.schedules;
  return html`<div class="page">
    <h1>Agendamentos</h1>
    <${ErrorNote} error=${list.error} />
    ${viewer.canWrite ? html`<${Section} title="Novo agendamento" id="novo"><${CreateForm} onDone=${() => list.reload()} /></${Section}>` : null}
    <${Section} title="Agendamentos" id="lista-agendamentos" actions=${html`<button type="button" class="btn" onClick=${() => list.reload()}>Atualizar</button>`}>
      ${!items ? html`<${Loading} />` : items.length === 0 ? html`<p class="muted">Nenhum agendamento.</p>` : html`
      <div class="table-wrap"><table class="grid">
        <caption class="sr-only">Agendamentos</caption>
        <thead><tr><th scope="col">#</th><th scope="col">Automação</th><th scope="col">Cron</th><th scope="col">Fuso</th>
          <th scope="col">Situação</th><th scope="col">Próxima execução</th><th scope="col">Última execução</th><th scope="col">Último trabalho</th>
          ${viewer.canWrite ? html`<th scope="col">Ações</th>` : null}</tr></thead>
        <tbody>${items.map((s) => html`<tr key=${s.id} data-schedule=${s.id}>
          <td>${s.id}</td><th scope="row">${s.automationType}</th><td class="mono">${s.cron}</td><td>${s.timezone}</td>
          <td>${s.enabled ? "Ativo" : "Pausado"}</td><td>${formatDate(s.nextRunAt)}</td><td>${formatDate(s.lastRunAt)}</td>
          <td>${s.lastWorkerId ? html`<a href=${`#/trabalhos/${s.lastWorkerId}`}>#${s.lastWorkerId}</a>` : "—"}</td>
          ${viewer.canWrite ? html`<td class="row-actions">
            <${ActionButton} label="Executar agora" name=${`executar-${s.id}`} run=${async () => {
              const data = await gql("mutation($id: Int!) { runScheduleNow(id: $id) { id } }", { id: s.id });
              notify(`Trabalho #${data.runScheduleNow.id} criado.`);
              list.reload();
            }} />
            <${ActionButton} label=${s.enabled ? "Pausar" : "Ativar"} name=${`alternar-${s.id}`} resend=${true}
              run=${act(`mutation($id: Int!) { updateSchedule(id: $id, input: { enabled: ${!s.enabled} }) { id } }`,
                { id: s.id }, s.enabled ? "Agendamento pausado." : "Agendamento ativado.")} />
            <${ActionButton} label="Excluir" kind="danger" name=${`excluir-${s.id}`} confirm=${`Excluir o agendamento ${s.id}?`}
              run=${act("mutation($id: Int!) { deleteSchedule(id: $id) { __typename } }", { id: s.id }, "Agendamento excluído.")} />
          </td>` : null}
        </tr>`)}</tbody>
      </table></div>`}
    </${Section}>
  </div>`;
}
