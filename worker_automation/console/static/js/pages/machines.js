// Machines: the registered worker processes, on / off, and registering a new one (key shown once).
import { html, useEffect, useMemo, useState } from "../html.js";
import { gql, useQuery, useSubscription } from "../api.js";
import { formatDate } from "../format.js";
import { ActionButton, ErrorNote, Loading, Section, notify, throttle } from "../ui.js";

const MACHINE = "id name automation queue status isOn createdAt lastClaimAt connected lastSeenAt";
// Presence (a dedicated machine's open jobCreated subscription) sends no event: read it again this often.
const PRESENCE_REFRESH_MS = 10000;
const LIST = `query Machines { machines { ${MACHINE} } automations { key displayName } queueLiveStatus { queues { queueName } } }`;
const CLAIMS = "subscription Claims { workerEvents { kind } }";

function Register({ choices, onDone }) {
  const [name, setName] = useState("");
  const [kind, setKind] = useState("queue");
  const [target, setTarget] = useState("");
  const [created, setCreated] = useState(null);
  const [copied, setCopied] = useState(false);
  const options = kind === "queue"
    ? (choices?.queueLiveStatus?.queues || []).map((q) => [q.queueName, q.queueName])
    : (choices?.automations || []).map((a) => [a.key, `${a.displayName} (${a.key})`]);
  const run = async () => {
    const data = await gql(
      `mutation Register($name: String!, $automation: String, $queue: String) {
        registerMachine(name: $name, automation: $automation, queue: $queue) { apiKey machine { ${MACHINE} } } }`,
      { name: name.trim(), automation: kind === "automation" ? target : null, queue: kind === "queue" ? target : null },
    );
    setCreated(data.registerMachine);
    setCopied(false);
    setName("");
    onDone();
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.apiKey);
      setCopied(true);
    } catch {
      notify("O navegador não deixou copiar: selecione a chave e copie à mão.", "error");
    }
  };
  return html`<div>
    <form class="filters" onSubmit=${(e) => e.preventDefault()} aria-label="Registrar máquina">
      <label>Nome <input value=${name} required onInput=${(e) => setName(e.target.value)} /></label>
      <label>Atende <select value=${kind} onChange=${(e) => { setKind(e.target.value); setTarget(""); }}>
        <option value="queue">uma fila (pool Celery)</option><option value="automation">uma automação (máquina dedicada)</option></select></label>
      <label>${kind === "queue" ? "Fila" : "Automação"} <select value=${target} onChange=${(e) => setTarget(e.target.value)}>
        <option value="">escolha</option>${options.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></label>
      <${ActionButton} label="Registrar" kind="primary" disabled=${!name.trim() || !target} run=${run} />
    </form>
    ${created ? html`<div class="once" role="alert">
      <p><strong>Máquina ${created.machine.name} registrada.</strong> Guarde a chave agora: ela não será mostrada de novo.</p>
      <p><label>X-Worker-Api-Key <input class="mono key" readonly value=${created.apiKey} data-field="machine-key" onFocus=${(e) => e.target.select()} /></label>
        <button type="button" class="btn" onClick=${copy}>${copied ? "Copiada" : "Copiar"}</button>
        <button type="button" class="btn" onClick=${() => setCreated(null)}>Já guardei</button></p>
    </div>` : null}
  </div>`;
}

// A dedicated machine is connected while its jobCreated subscription is open; a pool worker hears
// its queue through Celery and has no such presence.
function presence(m) {
  if (m.connected) return html`<span class="badge badge-CONCLUIDO">Conectada</span>`;
  if (!m.lastSeenAt) return html`<span class="muted">${m.queue ? "via fila" : "nunca conectada"}</span>`;
  return html`<span class="badge badge-FALHA">Desconectada</span> <span class="muted">vista em ${formatDate(m.lastSeenAt)}</span>`;
}

export function MachinesPage({ session }) {
  const { viewer } = session;
  const list = useQuery(LIST, {});
  // A claim changes a machine's last claim: read the (short) list again, at most every 2 s.
  const refresh = useMemo(() => throttle(() => list.reload(), 2000), []);
  useSubscription(CLAIMS, {}, (data) => data.workerEvents.kind === "CLAIMED" && refresh());
  useEffect(() => {
    const timer = setInterval(() => list.reload(), PRESENCE_REFRESH_MS);
    return () => clearInterval(timer);
  }, []);
  const toggle = (m) => async () => {
    const action = m.isOn ? "turnMachineOff" : "turnMachineOn";
    await gql(`mutation Toggle($id: Int!) { ${action}(id: $id) { id } }`, { id: m.id });
    notify(m.isOn ? `Máquina ${m.name} desligada.` : `Máquina ${m.name} ligada.`);
    list.reload();
  };
  const machines = list.data?.machines;
  return html`<div class="page">
    <h1>Máquinas</h1>
    <${ErrorNote} error=${list.error} />
    ${viewer.canManage ? html`<${Section} title="Registrar uma máquina" id="registrar"><${Register} choices=${list.data} onDone=${() => list.reload()} /></${Section}>` : null}
    <${Section} title="Máquinas registradas" id="lista-maquinas">
      ${!machines ? html`<${Loading} />` : machines.length === 0 ? html`<p class="muted">Nenhuma máquina registrada.</p>` : html`
      <div class="table-wrap"><table class="grid">
        <caption class="sr-only">Máquinas registradas</caption>
        <thead><tr><th scope="col">#</th><th scope="col">Nome</th><th scope="col">Atende</th><th scope="col">Situação</th><th scope="col">Conexão</th>
          <th scope="col">Registrada em</th><th scope="col">Último trabalho pego</th>${viewer.canManage ? html`<th scope="col">Ação</th>` : null}</tr></thead>
        <tbody>${machines.map((m) => html`<tr key=${m.id} data-machine=${m.name}>
          <td>${m.id}</td><th scope="row">${m.name}</th>
          <td>${m.queue ? `fila ${m.queue}` : `automação ${m.automation}`}</td>
          <td><span class=${`badge ${m.isOn ? "badge-CONCLUIDO" : "badge-CANCELADO"}`}>${m.isOn ? "Ligada" : "Desligada"}</span></td>
          <td data-field="connection">${presence(m)}</td>
          <td>${formatDate(m.createdAt)}</td><td>${formatDate(m.lastClaimAt)}</td>
          ${viewer.canManage ? html`<td><${ActionButton} resend=${true} label=${m.isOn ? "Desligar" : "Ligar"} name=${`${m.isOn ? "desligar" : "ligar"}-${m.name}`}
            confirm=${m.isOn ? `Desligar ${m.name}? Ela deixa de pegar trabalhos.` : null} run=${toggle(m)} /></td>` : null}
        </tr>`)}</tbody>
      </table></div>`}
    </${Section}>
  </div>`;
}
