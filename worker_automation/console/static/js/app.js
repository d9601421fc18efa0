// The console's shell: sign-in, navigation, connection state, and the page router.
import { html, render, useEffect, useRef, useState } from "./html.js";
import { connectEarly, connection, forgetKey, gql, onKeyRefused, probeFeatures, rememberKey, storedKey, useConnection } from "./api.js";
import { setTimeZone, timeZone } from "./format.js";
import { Notices, notify } from "./ui.js";
import { OverviewPage } from "./pages/overview.js";
import { JobsPage } from "./pages/jobs.js";
import { JobPage } from "./pages/job.js";
import { QueuesPage } from "./pages/queues.js";
import { MachinesPage } from "./pages/machines.js";
import { ProcessesPage } from "./pages/processes.js";
import { AutomationsPage } from "./pages/automations.js";
import { AutomationHealthPage } from "./pages/health.js";
import { SchedulesPage } from "./pages/schedules.js";
import { AuditPage } from "./pages/audit.js";

const VIEWER = "{ viewer { name perfil scopes canRead canWrite canManage timezone } }";

const PAGES = [
  { path: "", label: "Visão geral", view: OverviewPage },
  { path: "trabalhos", label: "Trabalhos", view: JobsPage },
  { path: "filas", label: "Filas", view: QueuesPage },
  { path: "maquinas", label: "Máquinas", view: MachinesPage },
  { path: "processos", label: "Processos", view: ProcessesPage },
  { path: "automacoes", label: "Automações", view: AutomationsPage },
  { path: "agendamentos", label: "Agendamentos", view: SchedulesPage },
  { path: "auditoria", label: "Auditoria", view: AuditPage },
];

function currentRoute() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean);
  return { parts, params: new URLSearchParams(query) };
}

function useRoute() {
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const changed = () => setRoute(currentRoute());
    window.addEventListener("hashchange", changed);
    return () => window.removeEventListener("hashchange", changed);
  }, []);
  return route;
}

const STATE_TEXT = {
  conectado: "Conectado ao vivo",
  conectando: "Conectando…",
  reconectando: "Sem conexão com a API — reconectando…",
};

function ConnectionState() {
  const state = useConnection();
  const seen = useRef(state.resyncs);
  useEffect(() => {
    if (state.resyncs > seen.current) notify("Conexão restabelecida: dados ressincronizados.");
    seen.current = state.resyncs;
  }, [state.resyncs]);
  const down = state.state !== "conectado" || state.httpDown;
  const text = state.httpDown && state.state === "conectado" ? "A API não respondeu — tentando de novo…" : STATE_TEXT[state.state];
  return html`<p class=${`conn conn-${down ? "down" : "up"}`} role="status" aria-live="polite" data-connection=${state.state}>
    <span class="dot" aria-hidden="true"></span>${text}
  </p>`;
}

// How an operator makes a key on the machine that runs the service (two lines, as a shell takes them).
const NEW_KEY_COMMAND =
  "worker-automation keys create --perfil administrador \\\n  --scopes worker_automation:read,worker_automation:write";

function SignIn({ onSignedIn, initialError }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState(initialError);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const trimmed = key.trim();
      const data = await gql(VIEWER, {}, trimmed);
      const features = await probeFeatures(trimmed);
      rememberKey(trimmed);
      onSignedIn({ viewer: data.viewer, features });
    } catch (failure) {
      setError(failure.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="signin" id="conteudo">
    <form class="card signin-card" onSubmit=${submit} aria-labelledby="signin-title">
      <h1 id="signin-title">Console de operação</h1>
      <p>Entre com uma chave de API (X-API-Key). Ela fica guardada só nesta aba do navegador e é esquecida ao sair.</p>
      <p class="small">Não tem uma chave? Crie uma no servidor, na pasta onde o serviço roda (a chave é a última linha que o comando mostra):</p>
      <pre class="mono signin-command" tabindex="0" aria-label="Comando que cria uma chave">${NEW_KEY_COMMAND}</pre>
      <p class="small muted">Perfis: administrador, diretoria ou funcionario. Escopos: worker_automation:read (consultar) e worker_automation:write (agir).</p>
      <label for="api-key">Chave de API</label>
      <input id="api-key" name="api-key" type="password" autocomplete="off" required value=${key}
        onInput=${(e) => setKey(e.target.value)} />
      ${error ? html`<p class="error" role="alert">${error}</p>` : null}
      <button class="btn primary" type="submit" disabled=${busy}>${busy ? "Verificando…" : "Entrar"}</button>
    </form>
  </main>`;
}

/** Focus the page's main heading (focusable by script only), or the main region without one. */
function focusHeading(main) {
  if (!main) return;
  const heading = main.querySelector("h1");
  const target = heading || main;
  if (heading && !heading.hasAttribute("tabindex")) heading.setAttribute("tabindex", "-1");
  target.focus({ preventScroll: false });
}

function Shell({ session, onSignOut }) {
  const route = useRoute();
  const [first = "", second] = route.parts;
  const page = PAGES.find((p) => p.path === first) || PAGES[0];
  const View = first === "trabalhos" && second ? JobPage : first === "automacoes" && second ? AutomationHealthPage : page.view;
  const { viewer } = session;
  const path = route.parts.join("/");
  const mainRef = useRef(null);
  useEffect(() => {
    document.title = `${page.label} — Console de operação`;
  }, [page]);
  // A new page leaves focus on a link that may be gone or on <body>: screen readers and keyboard
  // users land on the new page's heading instead (a filter change on the same page keeps focus).
  useEffect(() => focusHeading(mainRef.current), [path]);
  // The skip link must not change the hash: here the hash is the route.
  const skip = (event) => {
    event.preventDefault();
    focusHeading(mainRef.current);
  };
  return html`<div class="layout">
    <a class="skip" href="#conteudo" onClick=${skip}>Ir para o conteúdo</a>
    <header class="top">
      <p class="brand">worker-automation <span>console</span></p>
      <nav aria-label="Páginas" class="nav">
        <ul>${PAGES.map((p) => html`<li><a href=${`#/${p.path}`} aria-current=${p === page ? "page" : undefined}>${p.label}</a></li>`)}</ul>
      </nav>
      <${ConnectionState} />
      <div class="who">
        <span title=${viewer.scopes.join(", ")}>${viewer.name} · ${viewer.perfil}${viewer.canWrite ? "" : " · somente leitura"}</span>
        <button type="button" class="btn" onClick=${onSignOut}>Sair</button>
      </div>
    </header>
    <main id="conteudo" ref=${mainRef} tabindex="-1" data-route=${path}>
      <${View} key=${path} session=${session} route=${route} id=${second} />
    </main>
    <footer class="foot">Horários em ${timeZone()}.</footer>
    <${Notices} />
  </div>`;
}

function App() {
  const [session, setSessionState] = useState(null);
  // Dates are formatted while rendering: the zone must be known before the first page renders.
  const setSession = (value) => {
    if (value) setTimeZone(value.viewer.timezone);
    setSessionState(value);
  };
  const [checking, setChecking] = useState(Boolean(storedKey()));
  const [error, setError] = useState(null);
  useEffect(() => {
    const key = storedKey();
    if (!key) return;
    // The websocket handshake runs while the key is checked, not after.
    connectEarly();
    Promise.all([gql(VIEWER, {}, key), probeFeatures(key)]).then(
      ([data, features]) => setSession({ viewer: data.viewer, features }),
      (failure) => {
        if (failure.code === "UNAUTHENTICATED") forgetKey();
        setError(failure.message);
      },
    ).finally(() => setChecking(false));
  }, []);
  useEffect(
    () =>
      onKeyRefused((message) => {
        forgetKey();
        setSessionState(null);
        setError(message);
      }),
    [],
  );
  if (checking) return html`<p class="boot">Verificando a chave…</p>`;
  if (!session) return html`<${SignIn} onSignedIn=${setSession} initialError=${error} />`;
  const signOut = () => {
    forgetKey();
    setSession(null);
    window.location.hash = "#/";
  };
  return html`<${Shell} session=${session} onSignOut=${signOut} />`;
}

window.__console = { connection };
const root = document.getElementById("app");
// Preact adds to what is there: drop the loading text first.
root.textContent = "";
render(html`<${App} />`, root);
