// Small shared pieces of the console's screens.
import { html, useEffect, useState } from "./html.js";
import { Unavailable } from "./api.js";
import { NOT_NEEDED, NOT_SENT, WILL_RESEND, apiAnswers, unreached } from "./resend.js";
import { STATUS_LABELS, formatNumber, prettyJson } from "./format.js";

// --- notices (one polite live region for the whole console) ----------------------------------

const noticeListeners = new Set();
let noticeSerial = 0;

export function notify(text, kind = "ok") {
  const notice = { id: ++noticeSerial, text, kind };
  for (const listener of noticeListeners) listener(notice);
}

export function Notices() {
  const [items, setItems] = useState([]);
  useEffect(() => {
    const add = (notice) => {
      setItems((old) => [...old.slice(-3), notice]);
      setTimeout(() => setItems((old) => old.filter((n) => n.id !== notice.id)), 6000);
    };
    noticeListeners.add(add);
    return () => noticeListeners.delete(add);
  }, []);
  return html`<div class="notices" role="status" aria-live="polite">
    ${items.map((n) => html`<p key=${n.id} class=${`notice notice-${n.kind}`}>${n.text}</p>`)}
  </div>`;
}

// --- values ----------------------------------------------------------------------------------

export function StatusBadge({ status }) {
  return html`<span class=${`badge badge-${status}`} data-status=${status}>${STATUS_LABELS[status] || status}</span>`;
}

export function ProgressBar({ value, label = "Progresso" }) {
  const pct = Math.max(0, Math.min(100, Number(value) || 0));
  return html`<div class="progress" role="progressbar" aria-label=${label} aria-valuemin="0" aria-valuemax="100" aria-valuenow=${pct}>
    <span class="progress-fill" style=${`width:${pct}%`}></span><span class="progress-text">${pct}%</span>
  </div>`;
}

export function JsonBlock({ value, label }) {
  return html`<pre class="json" aria-label=${label} tabindex="0">${prettyJson(value)}</pre>`;
}

export function Num({ value }) {
  return html`<span class="num">${formatNumber(value)}</span>`;
}

// --- states of a section ---------------------------------------------------------------------

export function ErrorNote({ error }) {
  if (!error) return null;
  if (error instanceof Unavailable) return html`<${UnavailableNote} />`;
  return html`<p class="error" role="alert">${error.message}</p>`;
}

export function UnavailableNote({ what = "Esta informação" }) {
  return html`<p class="unavailable" data-unavailable="1">${what} está indisponível nesta versão da API.</p>`;
}

export function Loading() {
  return html`<p class="muted" aria-busy="true">Carregando…</p>`;
}

export function Section({ title, children, actions, id }) {
  const headingId = id ? `${id}-title` : undefined;
  return html`<section class="card" aria-labelledby=${headingId} id=${id}>
    <header class="card-head"><h2 id=${headingId}>${title}</h2>${actions ? html`<div class="card-actions">${actions}</div>` : null}</header>
    ${children}
  </section>`;
}

// --- actions ---------------------------------------------------------------------------------

/**
 * A button that runs one API action; the API's message is shown when it refuses. ``confirm``
 * asks first (a plain yes/no); ``run`` returns a promise whose value ``done`` receives.
 *
 * When the API cannot be reached, ``resend`` says what happens: ``true`` (the server refuses or
 * ignores a repeat) sends the action again once the API answers; a function is asked first,
 * then, whether the action is still wanted (false: what it would change already changed); left
 * out, the operator is told it may not have been done and is offered a button to try again.
 */
export function ActionButton({ label, run, done, confirm, kind = "", disabled = false, title, name, resend = null }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [waiting, setWaiting] = useState(false);
  const [offerAgain, setOfferAgain] = useState(false);
  const attempt = async () => {
    setBusy(true);
    setError(null);
    setOfferAgain(false);
    try {
      for (;;) {
        try {
          const value = await run();
          done?.(value);
          return;
        } catch (failure) {
          if (!unreached(failure)) throw failure;
          if (!resend) {
            setOfferAgain(true);
            throw new Error(NOT_SENT);
          }
        }
        setWaiting(true);
        notify(WILL_RESEND, "error");
        await apiAnswers();
        setWaiting(false);
        if (typeof resend === "function" && !(await resend())) {
          notify(NOT_NEEDED, "error");
          return;
        }
      }
    } catch (failure) {
      setError(failure);
      notify(failure.message, "error");
    } finally {
      setWaiting(false);
      setBusy(false);
    }
  };
  const click = () => {
    if (confirm && !window.confirm(confirm)) return;
    attempt();
  };
  return html`<span class="action">
    <button type="button" class=${`btn ${kind}`} onClick=${click} disabled=${busy || disabled} aria-busy=${busy}
      title=${title} data-action=${name || label}>${waiting ? "Aguardando a API…" : busy ? "Aguarde…" : label}</button>
    ${waiting ? html`<span class="muted inline" data-waiting="1">${WILL_RESEND}</span>` : null}
    ${error ? html`<span class="error inline" role="alert">${error.message}</span>` : null}
    ${offerAgain && !busy ? html`<button type="button" class="btn" data-action=${`${name || label}-de-novo`} onClick=${attempt}>Tentar de novo</button>` : null}
  </span>`;
}

/** A destructive action confirmed by typing a word (the queue's name, for a purge). */
export function TypedConfirm({ label, word, prompt, run, done }) {
  const [open, setOpen] = useState(false);
  const [typed, setTyped] = useState("");
  if (!open) return html`<button type="button" class="btn danger" data-action=${label} onClick=${() => setOpen(true)}>${label}</button>`;
  return html`<form class="typed-confirm" onSubmit=${(e) => e.preventDefault()}>
    <label>${prompt} <input value=${typed} onInput=${(e) => setTyped(e.target.value)} autocomplete="off" /></label>
    <${ActionButton} label="Confirmar" name=${`${label}-confirmar`} kind="danger" disabled=${typed !== word}
      run=${run} done=${(v) => { setOpen(false); setTyped(""); done?.(v); }} />
    <button type="button" class="btn" onClick=${() => { setOpen(false); setTyped(""); }}>Desistir</button>
  </form>`;
}

export function Pager({ page, pages, total, onPage, noun = "trabalhos" }) {
  return html`<nav class="pager" aria-label="Paginação">
    <button type="button" class="btn" disabled=${page <= 1} onClick=${() => onPage(page - 1)}>Anterior</button>
    <span>Página ${formatNumber(page)} de ${formatNumber(Math.max(pages, 1))} · ${formatNumber(total)} ${noun}</span>
    <button type="button" class="btn" disabled=${page >= pages} onClick=${() => onPage(page + 1)}>Próxima</button>
  </nav>`;
}

/** Calls ``fn`` at most once per ``ms``, the last call always honoured. */
export function throttle(fn, ms) {
  let timer = null;
  let last = 0;
  return (...args) => {
    const wait = last + ms - Date.now();
    clearTimeout(timer);
    if (wait <= 0) {
      last = Date.now();
      fn(...args);
    } else {
      timer = setTimeout(() => {
        last = Date.now();
        fn(...args);
      }, wait);
    }
  };
}
