"""The operator console at scale, in Debian's chromium: first useful screen, live lag, bytes shipped.

Against a ``serve`` over the database ``load_rows`` made (distributed mode, no worker running, so
the jobs it creates stay queued and each makes exactly one event; recovery off unless
``--recovery-seconds`` says otherwise, since the loaded queued jobs have no message in the broker
and each pass would send 500 of them again):

- first useful screen: a fresh browser tab (the key already in the tab's storage, as after
  sign-in) opens the overview, then the jobs page; the time from navigation start until the
  numbers (status counts and queue load) or the first page of rows are on screen, ``--loads``
  times each, every load a cold tab. Target (bench/README.md, Targets): <= 1.5 s.
- lag under load: the jobs page open, ``--rate`` jobs per second created through the API for
  ``--seconds`` (batches every 50 ms); for each new job, the time from the sending of its dispatch
  request until its row is in the page's DOM (both wall clocks of this machine), per 5-second
  window, so a growing lag shows as rising windows. (Not from ``createdAt``: it has whole seconds
  only, which added 0-1 s to every figure.) Target: no growing lag at 100 events/s.
- bytes shipped: every JS and CSS file the console can load, gzipped as the server sends them,
  and what the first load of the overview really transferred. Target: JS + CSS <= 250 KiB.

The jobs it creates are deleted at the end (the counters follow, by trigger).

    python -m bench.load_rows --rows 1000000 --database wa_bench_1m   # once
    python -m bench.console --database wa_bench_1m
    python -m bench.console --database wa_bench_console --seconds 10   # a small check
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    Procs,
    database_exists,
    fmt,
    median,
    percentile,
    pg_connect,
    print_facts,
    start_api,
    table,
    wait_for_quiet,
)

STATIC = Path(__file__).resolve().parent.parent / "worker_automation" / "console" / "static"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
FIRST_SCREEN_TARGET_MS = 1500.0
BYTES_TARGET = 250 * 1024
AUTOMATION = "demo.echo"
BATCH_EVERY = 0.05
IN_FLIGHT = 4
LAG_COLUMNS = ("window", "jobs", "p50", "p95", "max", "console p50", "console p95", "console max")
WINDOW_S = 5.0

# Recorded inside the page from its first script on: when a selector first matches (ms since
# navigation start), and when each job row first appears (browser wall clock, ms).
WATCH = """
(() => {
  window.__bench = { first: null, seen: {}, heard: {} };
  // When each job's event reached the page, before the console handles it.
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        const job = JSON.parse(event.data)?.payload?.data?.workerEvents?.worker;
        if (job && !(job.id in window.__bench.heard)) window.__bench.heard[job.id] = Date.now();
      });
    }
  };
  const selector = window.__benchSelector;
  const look = () => {
    if (window.__bench.first === null && selector && document.querySelector(selector)) {
      window.__bench.first = performance.now();
    }
    for (const row of document.querySelectorAll('tr[data-id]')) {
      const id = row.getAttribute('data-id');
      if (!(id in window.__bench.seen)) window.__bench.seen[id] = Date.now();
    }
  };
  new MutationObserver(look).observe(document, { childList: true, subtree: true, attributes: true });
})();
"""
SCREENS = {
    "overview": ("#/", "table.grid tbody tr[data-queue]"),
    "jobs": ("#/trabalhos", "table.jobs tbody tr[data-id]"),
}


@dataclass
class Target:
    url: str
    key: str


def init_script(selector: str, key: str) -> str:
    """What a tab runs first: the key as sign-in leaves it, and the watcher."""
    setup = f"window.__benchSelector = {selector!r}; sessionStorage.setItem('wa-console-key', {key!r});"
    return setup + WATCH


def shipped_bytes() -> list[tuple[str, int, int]]:
    """(file, bytes, gzipped bytes) of every JS and CSS file under the console's static folder."""
    rows = []
    for path in sorted(STATIC.rglob("*")):
        if path.suffix in {".js", ".mjs", ".css"}:
            raw = path.read_bytes()
            rows.append((str(path.relative_to(STATIC)), len(raw), len(gzip.compress(raw, compresslevel=9))))
    return rows


def first_screens(browser: Any, target: Target, loads: int) -> tuple[dict[str, list[float]], int]:
    """Milliseconds to the first useful screen per screen; bytes the first overview load moved."""
    times: dict[str, list[float]] = {name: [] for name in SCREENS}
    transferred = 0
    for attempt in range(loads):
        for name, (fragment, selector) in SCREENS.items():
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            context.add_init_script(init_script(selector, target.key))
            page = context.new_page()
            sizes: list[Any] = []
            page.on("requestfinished", lambda request, sizes=sizes: sizes.append(request))
            page.goto(f"{target.url}/console/{fragment}")
            page.wait_for_function("() => window.__bench && window.__bench.first !== null", timeout=60_000)
            times[name].append(float(page.evaluate("() => window.__bench.first")))
            if attempt == 0 and name == "overview":
                page.wait_for_timeout(500)
                transferred = sum(r.sizes()["responseBodySize"] for r in sizes if "/console/" in r.url)
            context.close()
    return times, transferred


def live_lag(
    browser: Any, target: Target, rate: int, seconds: float
) -> tuple[list[dict[str, Any]], list[int]]:
    """Rows per window with their lag, and every job id created."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.add_init_script(init_script("table.jobs tbody tr", target.key))
    page = context.new_page()
    page.goto(f"{target.url}/console/#/trabalhos")
    page.wait_for_selector('[data-connection="conectado"]', timeout=60_000)
    page.wait_for_function("() => window.__bench.first !== null", timeout=60_000)
    # (job id, when its dispatch request was sent, ms): createdAt has whole seconds only, so a lag
    # measured from it would be up to a second too long.
    created: list[tuple[int, float]] = []
    per_batch = max(1, round(rate * BATCH_EVERY))
    inputs = [{"automationType": AUTOMATION, "context": {"bench": "console"}} for _ in range(per_batch)]
    query = "mutation($i: [DispatchInput!]!) { dispatchAutomations(inputs: $i) { id createdAt } }"
    headers = {"X-API-Key": target.key}

    def send(client: httpx.Client) -> list[tuple[int, float]]:
        sent = time.time() * 1000
        body = client.post("/graphql", json={"query": query, "variables": {"i": inputs}}).json()
        if "errors" in body:
            raise SystemExit(f"dispatch refused: {body['errors']}")
        return [(int(j["id"]), sent) for j in body["data"]["dispatchAutomations"]]

    # A few batches may be in flight at once, so a slow answer does not lower the rate sent.
    with (
        httpx.Client(base_url=target.url, timeout=30.0, headers=headers) as client,
        ThreadPoolExecutor(IN_FLIGHT) as pool,
    ):
        # The page subscribes once its socket is up, and graphql-ws acknowledges no subscription:
        # the load starts once a first job's row has reached the page, so that every measured job
        # is dispatched while the page listens. (That first batch is not counted.)
        first_batch = [job_id for job_id, _ in send(client)]
        page.wait_for_function(f"() => '{first_batch[0]}' in window.__bench.seen", timeout=60_000)
        start = time.monotonic()
        pending = []
        for n in range(int(seconds / BATCH_EVERY)):
            wait = start + n * BATCH_EVERY - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            pending.append(pool.submit(send, client))
        for future in pending:
            created.extend(future.result())
        sent_for = time.monotonic() - start
    page.wait_for_timeout(3000)
    seen: dict[str, int] = page.evaluate("() => window.__bench.seen")
    heard: dict[str, int] = page.evaluate("() => window.__bench.heard")
    context.close()
    first_ms = min((sent for _, sent in created), default=0.0)
    windows: dict[int, list[tuple[float, float]]] = {}
    missing: list[int] = []  # positions in the order sent
    unheard = 0  # of them, those whose event never reached the page
    for position, (job_id, at) in enumerate(created):
        shown = seen.get(str(job_id))
        arrived = heard.get(str(job_id))
        if shown is None or arrived is None:
            missing.append(position)
            unheard += arrived is None
            continue
        window = windows.setdefault(int((at - first_ms) / (WINDOW_S * 1000)), [])
        window.append((shown - at, shown - arrived))
    rows = []
    for w, pairs in sorted(windows.items()):
        total = [p[0] for p in pairs]
        console = [p[1] for p in pairs]
        rows.append(
            {
                "window": f"{w * WINDOW_S:.0f}-{(w + 1) * WINDOW_S:.0f} s",
                "jobs": len(pairs),
                "p50": percentile(total, 50),
                "p95": percentile(total, 95),
                "max": max(total),
                "console p50": percentile(console, 50),
                "console p95": percentile(console, 95),
                "console max": max(console),
            }
        )
    sent_rate = len(created) / sent_for
    where = f" (sent as jobs {', '.join(str(n + 1) for n in missing[:20])})" if missing else ""
    summary = f"sent {len(created)} jobs in {sent_for:.1f} s ({sent_rate:.0f}/s)"
    print(f"{summary}; rows never seen: {len(missing)}{where}")
    if missing:
        # The page shows its first rows only: events that arrive together are applied in one
        # render, and a job pushed below the last row by later ones in that render is never drawn.
        print(
            f"  of them, events that never reached the page: {unheard}; events that reached it but "
            f"whose row no render showed (pushed off the page's rows by later jobs): {len(missing) - unheard}"
        )
    return rows, first_batch + [job_id for job_id, _ in created]


async def delete_jobs(database: str, ids: list[int]) -> None:
    conn = await pg_connect(database)
    try:
        await conn.execute("DELETE FROM workers WHERE id = ANY($1::int[])", ids)
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet:
        wait_for_quiet()
    print_facts()
    from playwright.sync_api import sync_playwright

    if not asyncio.run(database_exists(args.database)):
        raise SystemExit(f"{args.database} does not exist: run python -m bench.load_rows first")
    procs = Procs("console")
    created: list[int] = []
    try:
        recovery = {"WA_RECOVERY_SECONDS": f"{args.recovery_seconds:g}"}
        api = start_api(procs, args.database, extra_env=recovery)
        target = Target(api.url, api.operator_key("bench-console"))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                times, transferred = first_screens(browser, target, args.loads)
                windows, created = live_lag(browser, target, args.rate, args.seconds)
            finally:
                browser.close()
    finally:
        procs.close()
        if created:
            asyncio.run(delete_jobs(args.database, created))

    files = shipped_bytes()
    print()
    print(f"{args.database}: first useful screen, {args.loads} cold tabs each (ms from navigation start)")
    print(
        table(
            ["screen", "median", "max", "target"],
            [
                [name, fmt(median(v)), fmt(max(v)), f"<= {FIRST_SCREEN_TARGET_MS:.0f}"]
                for name, v in times.items()
            ],
        )
    )
    print()
    print(
        f"jobs page under {args.rate} events/s, per {WINDOW_S:.0f} s window (ms): dispatch sent -> row in"
        " the DOM, and the console's own part (event message in the page -> row in the DOM);"
        f" WA_RECOVERY_SECONDS={args.recovery_seconds:g}"
    )
    print(
        table(
            ["window", "jobs", "p50", "p95", "max", "console p50", "console p95", "console max"],
            [[r[c] if c in ("window", "jobs") else fmt(r[c]) for c in LAG_COLUMNS] for r in windows],
        )
    )
    if len(windows) >= 2:
        first, last = windows[0], windows[-2]
        print(
            f"p95 first window {fmt(first['p95'])} ms (console {fmt(first['console p95'])}), "
            f"last full window {fmt(last['p95'])} ms (console {fmt(last['console p95'])})"
        )
    print()
    total_raw = sum(raw for _, raw, _ in files)
    total_gz = sum(gz for _, _, gz in files)
    print(table(["file", "bytes", "gzipped"], [[name, raw, gz] for name, raw, gz in files]))
    print(
        f"JS + CSS: {total_raw / 1024:.1f} KiB, {total_gz / 1024:.1f} KiB gzipped "
        f"(target <= {BYTES_TARGET // 1024} KiB); "
        f"first overview load transferred {transferred / 1024:.1f} KiB"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default="wa_bench_1m")
    parser.add_argument("--loads", type=int, default=5, help="cold loads per screen")
    parser.add_argument("--rate", type=int, default=100, help="jobs (events) per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send them")
    parser.add_argument(
        "--recovery-seconds",
        type=float,
        default=0.0,
        help=(
            "WA_RECOVERY_SECONDS of the serve (default 0, off: the loaded queued jobs have no "
            "message in the broker, so each recovery pass would send 500 of them again, a load "
            "this benchmark does not measure; 60 is the service's default)"
        ),
    )
    parser.add_argument("--wait-quiet", action="store_true", help="wait for load average < 1.5 first")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
