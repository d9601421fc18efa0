"""The operator console in Debian's chromium against a real ``serve``, embedded and distributed.

One ``serve`` per mode is shared by the tests of this module (started once, in the order the
tests are written); each test opens its own browser tab and signs in. What is checked is what an
operator sees: rows changing state with no reload, actions from a job's page, what a read-only
key is offered, axe-core's verdict on every page, and recovery after the API is killed.
``WA_CONSOLE_SCREENSHOTS=DIR`` also saves a picture of each page there (the README's pictures).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
import redis

from tests.integration.harness import (
    OPERATOR_SCOPES,
    Proc,
    Processes,
    Stack,
    clean_env,
    cli_command,
    free_port,
    managed_processes,
    run_cli,
    wait_ready,
    wait_until,
)
from tests.integration.test_graphiql_browser import CHROMIUM, CHROMIUM_ARGS, require_browser
from tests.services import PG_HOST, PG_PORT, PG_USER, REDIS_HOST, REDIS_PORT, REDIS_TEST_DB

pytestmark = pytest.mark.browser

AXE = Path(__file__).with_name("vendor") / "axe-core" / "axe.min.js"
STEP = 20_000  # ms: one visible change on screen
JOB_STEP = 45.0  # s: a job reaching a state (the first one waits for the workers to connect)
SHOTS = os.environ.get("WA_CONSOLE_SCREENSHOTS")
PAGES = {
    "visao-geral": "",
    "trabalhos": "trabalhos",
    "filas": "filas",
    "maquinas": "maquinas",
    "automacoes": "automacoes",
    "agendamentos": "agendamentos",
    "auditoria": "auditoria",
}
AXE_RUN = """async () => (await axe.run(document, { resultTypes: ['violations'] })).violations
    .filter(v => ['serious', 'critical'].includes(v.impact))
    .map(v => `${v.id}: ${v.help} -> ${v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')}`)"""
GQL_DISPATCH = "mutation($i: DispatchInput!) { dispatchAutomation(input: $i) { id status } }"


@dataclass
class System:
    """One running service (and its workers) the console talks to."""

    mode: str
    procs: Processes
    workdir: Path
    env: dict[str, str]
    port: int
    serve: Proc
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict[str, Any] | None = None, key: str = "admin") -> Any:
        response = httpx.post(
            f"{self.url}/graphql",
            json={"query": query, "variables": variables or {}},
            headers={"X-API-Key": self.keys[key]},
            timeout=15.0,
        )
        assert response.status_code == 200, response.text
        return response.json()

    def dispatch(self, automation: str, context: dict[str, Any]) -> int:
        body = self.graphql(GQL_DISPATCH, {"i": {"automationType": automation, "context": context}})
        assert "errors" not in body, body
        return int(body["data"]["dispatchAutomation"]["id"])

    def status(self, job_id: int) -> dict[str, Any]:
        body = self.graphql("query($id: Int!) { worker(id: $id) { status retryCount } }", {"id": job_id})
        job: dict[str, Any] = body["data"]["worker"]
        return job

    def wait_status(self, job_id: int, status: str, timeout: float = JOB_STEP) -> None:
        wait_until(lambda: self.status(job_id)["status"] == status, timeout, f"job {job_id} never {status}")

    def restart(self) -> None:
        """Kill the API (its whole process group) and start it again on the same port."""
        self.serve.kill()
        self.start_serve()

    def start_serve(self) -> None:
        args = [*cli_command(), "serve", "--port", str(self.port)]
        self.serve = self.procs.start("serve", args, self.env, self.workdir)
        wait_ready(self.url, self.serve, timeout=90.0)


def make_keys(system: System) -> None:
    for name, perfil, scopes in (
        ("admin", "administrador", OPERATOR_SCOPES),
        ("reader", "funcionario", "worker_automation:read"),
    ):
        system.keys[name] = run_cli(
            ["keys", "create", "--perfil", perfil, "--scopes", scopes, "--name", name],
            system.env,
            system.workdir,
        )


@contextlib.contextmanager
def embedded_system(procs: Processes, workdir: Path) -> Iterator[System]:
    """``serve`` with no configuration at all: SQLite, embedded broker and pool workers."""
    port = free_port()
    env = clean_env()
    args = [*cli_command(), "serve", "--port", str(port)]
    serve = procs.start("serve", args, env, workdir)
    system = System("embedded", procs, workdir, env, port, serve)
    wait_ready(system.url, serve, timeout=90.0)
    make_keys(system)
    yield system


def embedded_console(name: str) -> Any:
    """A module-scoped ``system`` fixture: one embedded ``serve`` for the module's browser tests
    (skipped, with the reason, where Debian's chromium is missing)."""

    @pytest.fixture(scope="module")
    def system(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
        require_browser()
        base = tmp_path_factory.mktemp(name)
        workdir = base / "work"
        workdir.mkdir()
        with (
            managed_processes(base / "logs", request.session) as procs,
            embedded_system(procs, workdir) as built,
        ):
            yield built

    return system


def shot(page: Any, name: str) -> None:
    """Save the page as ``NAME.png`` in ``WA_CONSOLE_SCREENSHOTS``, when set."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


async def _admin_sql(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextlib.contextmanager
def distributed_system(procs: Processes, workdir: Path) -> Iterator[System]:
    """``serve`` on its own PostgreSQL database and the suite's Redis, with a real pool worker."""
    from tests.services import require_postgres, require_redis

    require_postgres()
    require_redis()
    name = f"wa_test_console_{uuid.uuid4().hex[:10]}"
    redis_url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_TEST_DB}"
    flush = redis.Redis.from_url(redis_url)
    flush.flushdb()
    asyncio.run(_admin_sql(f'CREATE DATABASE "{name}"'))
    stack: Stack | None = None
    try:
        stack = Stack(
            procs,
            database_url=f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}",
            redis_url=redis_url,
            redis_prefix=f"wa-test-{uuid.uuid4().hex[:8]}",
            workdir=workdir,
        )
        serve = stack.serve()
        system = System("distributed", procs, workdir, dict(stack.env), stack.port, serve)
        make_keys(system)
        stack.pool_worker("scan", concurrency=1)
        yield system
    finally:
        procs.close()
        if stack is not None:
            stack.close()
        flush.flushdb()
        flush.close()
        asyncio.run(_admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="module", params=["embedded", "distributed"])
def system(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    require_browser()
    base = tmp_path_factory.mktemp(f"console-{request.param}")
    workdir = base / "work"
    workdir.mkdir()
    make = embedded_system if request.param == "embedded" else distributed_system
    with managed_processes(base / "logs", request.session) as procs, make(procs, workdir) as built:
        yield built


@pytest.fixture(scope="module")
def browser(system: System) -> Iterator[Any]:
    """Chromium, started after the system: set-up and teardown of the system run event loops of
    their own, which cannot run while Playwright's synchronous API holds the thread's loop."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


def open_console(browser: Any, system: System, key: str = "admin", timezone: str | None = None) -> Any:
    """A fresh tab, signed in with ``key`` (the browser in ``timezone``, if given); page errors fail
    the test at the end."""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, timezone_id=timezone)
    page = context.new_page()
    page.set_default_timeout(STEP)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: dialog.accept())
    page.errors = errors
    page.goto(f"{system.url}/")
    page.wait_for_selector("#api-key")
    page.fill("#api-key", system.keys[key])
    page.click("button[type=submit]")
    page.wait_for_selector('[data-connection="conectado"]')
    return page


@pytest.fixture
def page(browser: Any, system: System, request: pytest.FixtureRequest) -> Iterator[Any]:
    tab = open_console(browser, system)
    failed_before = request.session.testsfailed
    yield tab
    if request.session.testsfailed > failed_before:
        # What the operator saw when it failed, for the report.
        print(f"\n===== console at {tab.url} =====\n{tab.inner_text('body')[:4000]}")
    errors = list(tab.errors)
    # Route handlers a test left in flight end quietly with the tab, not in the next test.
    tab.unroute_all(behavior="ignoreErrors")
    tab.context.close()
    assert errors == [], errors


def go(page: Any, path: str) -> None:
    """Open a page of the console (as its link would) and wait until it is that page's turn."""
    page.evaluate("(hash) => { window.location.hash = hash; }", f"#/{path}")
    page.wait_for_selector(f'main[data-route="{path}"] h1')
    if path.startswith("trabalhos"):
        # The page says when its subscription is surely listening (and it has read again).
        page.wait_for_selector(f'main[data-route="{path}"] [data-live="1"]')


def badge(page: Any, status: str, scope: str = ".job-head") -> None:
    """Until the job's badge shows ``status`` (a job step: the machine is shared, allow for it)."""
    page.wait_for_selector(f'{scope} [data-status="{status}"]', timeout=JOB_STEP * 1000)


def test_sign_in_refuses_a_bad_key_and_sign_out_forgets_the_key(browser: Any, system: System) -> None:
    context = browser.new_context()
    tab = context.new_page()
    try:
        response = tab.goto(f"{system.url}/")
        assert response is not None and response.url.endswith("/console/")
        tab.fill("#api-key", "wak_not-a-key")
        tab.click("button[type=submit]")
        assert "inv" in tab.inner_text('[role="alert"]', timeout=STEP).lower()
        tab.fill("#api-key", system.keys["admin"])
        tab.click("button[type=submit]")
        tab.wait_for_selector('[data-connection="conectado"]', timeout=STEP)
        assert "administrador" in tab.inner_text(".who")
        assert tab.evaluate("() => Object.keys(sessionStorage).length") == 1
        tab.click("text=Sair")
        tab.wait_for_selector("#api-key", timeout=STEP)
        assert tab.evaluate("() => Object.keys(sessionStorage).length") == 0
    finally:
        context.close()


def test_a_reload_keeps_the_key_for_the_tab_and_reconnects(browser: Any, system: System) -> None:
    context = browser.new_context()
    tab = context.new_page()
    try:
        tab.goto(f"{system.url}/")
        tab.fill("#api-key", system.keys["admin"])
        tab.click("button[type=submit]")
        tab.wait_for_selector('[data-connection="conectado"]', timeout=STEP)
        tab.reload()
        tab.wait_for_selector('[data-connection="conectado"]', timeout=STEP)  # kept for the tab
        assert tab.evaluate("() => Object.keys(sessionStorage).length") == 1
    finally:
        context.close()


def test_a_dispatched_job_appears_and_changes_state_with_no_reload(page: Any, system: System) -> None:
    go(page, "trabalhos")
    page.wait_for_selector("table.jobs")
    page.evaluate("() => { window.__sameDocument = true; }")
    # The single scan worker is kept busy, so the watched job is seen waiting before it runs.
    blocker = system.dispatch("demo.sleep", {"seconds": 2})
    job = system.dispatch("demo.sleep", {"seconds": 2})
    row = f'tr[data-id="{job}"]'
    page.wait_for_selector(f'{row}[data-status="AGENDADO"]')
    page.wait_for_selector(f'{row}[data-status="EXECUTANDO"]', timeout=JOB_STEP * 1000)
    page.wait_for_selector(f'{row}[data-status="CONCLUIDO"]', timeout=JOB_STEP * 1000)
    assert page.inner_text(f"{row} .progress-text") == "100%"
    page.wait_for_selector(f'tr[data-id="{blocker}"][data-status="CONCLUIDO"]')
    assert page.evaluate("() => window.__sameDocument") is True


def test_cancel_a_running_job_from_its_page(page: Any, system: System) -> None:
    job = system.dispatch("demo.sleep", {"seconds": 120})
    go(page, f"trabalhos/{job}")
    badge(page, "EXECUTANDO")
    page.click('[data-action="Cancelar"]')
    badge(page, "CANCELADO")
    assert system.status(job)["status"] == "CANCELADO"
    assert page.query_selector('[data-action="Cancelar"]') is None
    assert page.query_selector('[data-action="Retentar"]') is not None


def test_retry_a_failed_job_from_its_page(page: Any, system: System) -> None:
    job = system.dispatch("demo.fail", {"message": "Portal fora do ar"})
    go(page, f"trabalhos/{job}")
    badge(page, "FALHA")
    assert "Portal fora do ar" in page.inner_text('[data-field="error"]')
    page.click('[data-action="Retentar"]')
    page.wait_for_function(
        "() => document.querySelector('[data-field=\"Tentativas repetidas\"] dd')?.textContent === '1'",
        timeout=JOB_STEP * 1000,
    )
    badge(page, "FALHA")
    assert system.status(job) == {"status": "FALHA", "retryCount": 1}


def test_an_actions_answer_overtaken_by_live_events_does_not_undo_them(page: Any, system: System) -> None:
    """The retry's answer (AGENDADO) is held back until the job has run and failed again, as
    happens when the job runs faster than the answer travels: the page keeps what it was told last."""
    job = system.dispatch("demo.fail", {"message": "Portal fora do ar"})
    go(page, f"trabalhos/{job}")
    badge(page, "FALHA")
    held: list[tuple[Any, Any]] = []

    def hold_the_retry(route: Any) -> None:
        # Told apart by its answer: a persisted query's body carries only the document's hash.
        answer = route.fetch()  # done on the server
        if '"retryWorker"' not in answer.text():
            route.fulfill(response=answer)
            return
        held.append((route, answer))  # answered later

    page.route("**/graphql", hold_the_retry)
    page.click('[data-action="Retentar"]')
    page.wait_for_function(
        "() => document.querySelector('[data-field=\"Tentativas repetidas\"] dd')?.textContent === '1'",
        timeout=JOB_STEP * 1000,
    )
    badge(page, "FALHA")
    assert len(held) == 1
    route, answer = held[0]
    assert '"status":"AGENDADO"' in answer.text().replace(" ", "")
    route.fulfill(response=answer)
    page.wait_for_selector('.notices >> text="Trabalho enviado de novo."')
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert page.query_selector('.job-head [data-status="FALHA"]') is not None
    assert page.query_selector('.job-head [data-status="AGENDADO"]') is None
    # A handler still in flight (a read the page sent meanwhile) must not fail after the test.
    page.unroute_all(behavior="ignoreErrors")


def test_a_list_read_overtaken_by_live_events_gets_them_too(page: Any, system: System) -> None:
    """A filter's read is held back while the job it shows running ends: the list it brings must
    not show the job running again (no event would ever correct it); finished, it is not in the
    running list at all."""
    other = system.dispatch("demo.fail", {"message": "Portal fora do ar"})
    system.wait_status(other, "FALHA")
    job = system.dispatch("demo.sleep", {"seconds": 3})
    go(page, "trabalhos")
    row = f'tr[data-id="{job}"]'
    page.wait_for_selector(f'{row}[data-status="EXECUTANDO"]', timeout=JOB_STEP * 1000)
    page.wait_for_selector(f'tr[data-id="{other}"]')
    held: list[tuple[Any, Any]] = []

    def hold_the_filtered_read(route: Any) -> None:
        if held or "status: EXECUTANDO" not in (route.request.post_data or ""):
            route.continue_()
            return
        held.append((route, route.fetch()))  # read now, answered later

    page.route("**/graphql", hold_the_filtered_read)
    page.select_option('form.filters select[name="status"]', "EXECUTANDO")
    page.click('form.filters button[type="submit"]')
    for _ in range(STEP // 50):  # the route handler runs while playwright is waiting
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    system.wait_status(job, "CONCLUIDO")
    page.wait_for_selector(row, state="detached", timeout=JOB_STEP * 1000)  # the event came
    route, answer = held[0]
    read = {item["id"]: item["status"] for item in answer.json()["data"]["workers"]["items"]}
    assert read.get(job) == "EXECUTANDO", read
    route.fulfill(response=answer)
    page.wait_for_selector(f'tr[data-id="{other}"]', state="detached")  # the filtered list is shown
    assert page.query_selector(row) is None
    # A handler still in flight (a read the page sent meanwhile) must not fail after the test.
    page.unroute_all(behavior="ignoreErrors")


def test_a_jobs_page_lists_its_audit_entries_however_many_came_after(page: Any, system: System) -> None:
    job = system.dispatch("demo.fail", {"message": "auditada"})
    system.wait_status(job, "FALHA")
    # Over a hundred entries about something else come after the job's own.
    try:
        for _ in range(101):
            body = system.graphql('mutation { pauseQueue(queue: "observer") { paused } }')
            assert "errors" not in body, body
    finally:
        system.graphql('mutation { resumeQueue(queue: "observer") { paused } }')
    go(page, f"trabalhos/{job}")
    page.wait_for_selector('#auditoria-job [data-audit="dispatch"]')
    assert page.eval_on_selector_all("#auditoria-job [data-audit]", "nodes => nodes.length") == 1


def test_pause_and_resume_a_queue(page: Any, system: System) -> None:
    go(page, "filas")
    paused_field = '[data-queue="observer"] [data-field="paused"]'
    page.wait_for_selector(paused_field)
    page.click('[data-action="pausar-observer"]')
    page.wait_for_function(f"() => document.querySelector('{paused_field}').textContent.includes('Pausada')")
    answer = system.graphql("{ queueLiveStatus { queues { queueName paused } } }")
    paused = {q["queueName"]: q["paused"] for q in answer["data"]["queueLiveStatus"]["queues"]}
    assert paused["observer"] is True
    page.click('[data-action="retomar-observer"]')
    page.wait_for_function(f"() => document.querySelector('{paused_field}').textContent === 'Ativa'")


def test_a_read_only_key_is_offered_no_action(browser: Any, system: System) -> None:
    job = system.dispatch("demo.fail", {"message": "para leitura"})
    system.wait_status(job, "FALHA")
    tab = open_console(browser, system, key="reader")
    try:
        assert "somente leitura" in tab.inner_text(".who")
        for path in [*PAGES.values(), f"trabalhos/{job}"]:
            go(tab, path)
            # Loaded: whatever the page would offer is on it by now.
            tab.wait_for_function("() => !document.querySelector('[aria-busy=\"true\"]')")
            offered = tab.eval_on_selector_all(
                "main [data-action], main input[type=checkbox], main form[aria-label='Registrar máquina']",
                "nodes => nodes.map(n => n.outerHTML.slice(0, 80))",
            )
            assert offered == [], (path, offered)
        assert tab.errors == []
    finally:
        tab.context.close()


def test_every_page_passes_axe_with_no_serious_violation(page: Any, system: System) -> None:
    job = system.dispatch("demo.fail", {"message": "Certidão indisponível no portal"})
    system.wait_status(job, "FALHA")
    pages = {**PAGES, "trabalho": f"trabalhos/{job}"}
    for name, path in pages.items():
        go(page, path)
        page.wait_for_function("() => !document.querySelector('[aria-busy=\"true\"]')")
        page.wait_for_timeout(400)
        if SHOTS and system.mode == "embedded":
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))
        # This API has every part the console can use: nothing may say "indisponível".
        assert page.query_selector("[data-unavailable]") is None, name
        if not page.evaluate("() => Boolean(window.axe)"):
            page.add_script_tag(path=str(AXE))
        found = page.evaluate(AXE_RUN)
        assert found == [], (name, found)


def test_the_console_says_when_the_api_is_gone_and_recovers_by_itself(page: Any, system: System) -> None:
    go(page, "trabalhos")
    page.wait_for_selector("table.jobs")
    system.serve.kill()
    page.wait_for_selector('[data-connection="reconectando"]')
    assert "reconectando" in page.inner_text(".conn").lower()
    system.start_serve()
    page.wait_for_selector('[data-connection="conectado"]', timeout=JOB_STEP * 1000)
    page.wait_for_selector(".notice >> text=ressincronizados")
    # The list is live again: a job dispatched after the restart shows up and finishes.
    job = system.dispatch("demo.echo", {"depois": "do reinício"})
    page.wait_for_selector(f'tr[data-id="{job}"][data-status="CONCLUIDO"]', timeout=JOB_STEP * 1000)


def test_select_several_jobs_and_cancel_them_together(page: Any, system: System) -> None:
    jobs = [system.dispatch("demo.sleep", {"seconds": 120}) for _ in range(2)]
    go(page, "trabalhos")
    for job in jobs:
        page.check(f'tr[data-id="{job}"] input[type=checkbox]')
    assert "2 selecionado(s)" in page.inner_text(".bulk")
    page.click('[data-action="cancelar-selecionados"]')
    for job in jobs:
        page.wait_for_selector(f'tr[data-id="{job}"][data-status="CANCELADO"]')
        assert system.status(job)["status"] == "CANCELADO"


def test_purging_a_queue_needs_its_name_typed(page: Any, system: System) -> None:
    go(page, "filas")
    page.click('[data-queue="observer"] >> xpath=ancestor::section >> [data-action="Esvaziar no broker"]')
    confirm = page.locator('[data-action="Esvaziar no broker-confirmar"]')
    assert confirm.is_disabled()
    page.fill(".typed-confirm input", "observe")
    assert confirm.is_disabled()
    page.fill(".typed-confirm input", "observer")
    confirm.click()
    page.wait_for_selector(".notice >> text=observer")
    assert page.query_selector(".typed-confirm") is None


def test_a_refused_filter_does_not_leave_the_rows_of_the_last_one(page: Any, system: System) -> None:
    job = system.dispatch("demo.echo", {"n": "filtro recusado"})
    go(page, "trabalhos")
    page.wait_for_selector(f'table.jobs tbody tr[data-id="{job}"]')
    page.fill('input[name="createdFrom"]', "2026-03-02T18:00")
    page.fill('input[name="createdTo"]', "2026-03-02T14:00")
    page.click('form.filters button[type="submit"]')
    page.wait_for_selector('p.error[role="alert"] >> text=created_from')
    assert page.locator("table.jobs tbody tr").count() == 0
    # The filter put right, the list answers for it again.
    page.fill('input[name="createdTo"]', "")
    page.fill('input[name="createdFrom"]', "")
    page.click('form.filters button[type="submit"]')
    page.wait_for_selector(f'table.jobs tbody tr[data-id="{job}"]')
    assert page.locator('p.error[role="alert"]').count() == 0


def _two_failures_listed(page: Any, system: System, marker: str) -> list[int]:
    """Two failed jobs carrying ``marker``, and Trabalhos filtered to them (read: the unfiltered
    list may show the same two rows first)."""
    failed = [system.dispatch("demo.fail", {"message": marker}) for _ in range(2)]
    for job in failed:
        system.wait_status(job, "FALHA")
    go(page, "trabalhos")
    page.fill('input[name="q"]', marker)
    page.click('form.filters button[type="submit"]')
    page.wait_for_function("() => document.querySelector('#jobs-count')?.textContent === '2 trabalhos'")
    return failed


def test_a_bulk_action_on_the_filter_says_how_many_it_matches(page: Any, system: System) -> None:
    failed = _two_failures_listed(page, system, f"lote-{uuid.uuid4().hex[:8]}")
    for job in failed:
        page.wait_for_selector(f'table.jobs tbody tr[data-id="{job}"]')
    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))
    page.click('[data-action="retentar-filtro"]')
    page.wait_for_selector(".notice >> text=2 de 2 trabalho(s) enviado(s) de novo.")
    assert asked == [
        "Retentar os trabalhos com falha ou cancelados entre os 2 trabalho(s) que atendem ao filtro?"
    ]
    for job in failed:
        assert system.status(job)["retryCount"] == 1


def test_a_bulk_action_says_no_count_before_its_filter_is_read(page: Any, system: System) -> None:
    """Clicked while the list shown is still the previous filter's, the confirmation gives no
    count: the one on screen is another filter's."""
    marker = f"antes-{uuid.uuid4().hex[:8]}"
    failed = _two_failures_listed(page, system, marker)
    held: list[Any] = []
    other = f"nenhum-{marker}"

    def hold_the_new_filters_read(route: Any) -> None:
        if held or "workers(" not in (data := route.request.post_data or "") or other not in data:
            route.continue_()
            return
        held.append(route)

    page.route("**/graphql", hold_the_new_filters_read)
    page.fill('input[name="q"]', other)
    page.click('form.filters button[type="submit"]')
    while not held:  # the new filter's read, held back
        page.wait_for_timeout(20)
    assert page.inner_text("#jobs-count") == "2 trabalhos"
    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))
    page.click('[data-action="retentar-filtro"]')
    while not asked:
        page.wait_for_timeout(20)
    assert asked == [
        "Retentar os trabalhos com falha ou cancelados entre todos os trabalhos que atendem ao filtro?"
    ]
    held[0].continue_()
    page.wait_for_selector(".notice >> text=0 de 0 trabalho(s) enviado(s) de novo.")
    page.wait_for_function("() => document.querySelector('#jobs-count')?.textContent === '0 trabalhos'")
    for job in failed:
        assert system.status(job)["retryCount"] == 0


def test_audit_since_is_read_in_the_service_zone(browser: Any, system: System) -> None:
    """The service's zone (America/Sao_Paulo) reads the "Desde" field, as it does every date the
    console shows, wherever the operator's browser is."""
    system.dispatch("demo.echo", {"n": "auditoria"})
    page = open_console(browser, system, timezone="Asia/Tokyo")
    try:
        go(page, "auditoria")
        page.wait_for_selector("#registro tbody tr[data-entry]")
        rows = "() => document.querySelectorAll('#registro tbody tr[data-entry]').length"
        now = datetime.now(ZoneInfo("America/Sao_Paulo"))
        for shift, listed in ((timedelta(hours=1), "=== 0"), (timedelta(minutes=-10), "> 0")):
            page.fill('input[type="datetime-local"]', (now + shift).strftime("%Y-%m-%dT%H:%M"))
            page.click('form.filters button[type="submit"]')
            page.wait_for_function(f"() => ({rows})() {listed}")
        assert page.errors == []
    finally:
        page.context.close()


def test_register_a_machine_and_see_its_key_once(page: Any, system: System) -> None:
    go(page, "maquinas")
    form = page.locator("form[aria-label='Registrar máquina']")
    form.locator("input").first.fill("console-teste")
    form.locator("select").nth(1).select_option("observer")
    page.click('[data-action="Registrar"]')
    key = page.locator('[data-field="machine-key"]')
    key.wait_for()
    assert key.input_value().startswith("wmk_")
    page.wait_for_selector('tr[data-machine="console-teste"]')
    go(page, "filas")
    go(page, "maquinas")
    page.wait_for_selector('tr[data-machine="console-teste"]')
    assert page.query_selector('[data-field="machine-key"]') is None


def test_move_and_reprioritise_a_queued_job_from_its_page(page: Any, system: System) -> None:
    settings = 'mutation($dev: Boolean) { updateAutomationSettings(key: "demo.echo", devMode: $dev) { key } }'
    # In development mode its jobs are not claimed: this one stays queued while it is handled.
    assert "errors" not in system.graphql(settings, {"dev": True})
    try:
        job = system.dispatch("demo.echo", {"fica": "na fila"})
        go(page, f"trabalhos/{job}")
        badge(page, "AGENDADO")
        # A number GraphQL itself refuses is explained in Portuguese, and nothing changes.
        page.fill('input[type="number"][max="9"]', "99999999999")
        page.click('[data-action="prioridade"]')
        refused = "Número fora do intervalo aceito (de -2147483648 a 2147483647): 99999999999"
        page.wait_for_selector(f"text={refused}")
        assert system.status(job)["status"] == "AGENDADO"
        page.fill('input[type="number"][max="9"]', "7")
        page.click('[data-action="prioridade"]')
        page.wait_for_function(
            "() => document.querySelector('[data-field=\"Prioridade\"] dd')?.textContent === '7'"
        )
        # The page's audit list shows each action as it is answered.
        page.wait_for_selector('#auditoria-job [data-audit="reorder"]')
        page.select_option(".job-actions select", "observer")
        page.click('[data-action="Mover"]')
        page.wait_for_function(
            "() => document.querySelector('[data-field=\"Fila\"] dd')?.textContent === 'observer'"
        )
        page.wait_for_selector('#auditoria-job [data-audit="move"]')
        badge(page, "AGENDADO")
        page.click('[data-action="Cancelar"]')
        badge(page, "CANCELADO")
        page.wait_for_selector('#auditoria-job [data-audit="cancel"]')
        # Sent again by hand, it has no backoff to wait out: it may run at once, and says so.
        page.click('[data-action="Retentar"]')
        badge(page, "AGENDADO")
        page.wait_for_selector('[data-field="Próxima tentativa"] [data-countdown] >> text=já pode rodar')
        page.wait_for_selector('#auditoria-job [data-audit="retry"]')
    finally:
        system.graphql(settings, {"dev": False})


def test_create_run_switch_and_delete_a_schedule(page: Any, system: System) -> None:
    go(page, "agendamentos")
    form = page.locator("form[aria-label='Novo agendamento']")
    form.locator("select").select_option("demo.echo")
    form.get_by_label("Cron").fill("0 6 * * 1-5")
    page.click('[data-action="Criar"]')
    row = page.locator("tr[data-schedule]").filter(has_text="demo.echo").first
    row.wait_for()
    schedule = row.get_attribute("data-schedule")
    assert "Ativo" in row.inner_text()
    page.click(f'[data-action="executar-{schedule}"]')
    page.wait_for_selector(".notice >> text=criado")
    page.click(f'[data-action="alternar-{schedule}"]')
    page.wait_for_function(
        f"() => document.querySelector('tr[data-schedule=\"{schedule}\"]')?.innerText.includes('Pausado')"
    )
    page.click(f'[data-action="excluir-{schedule}"]')
    page.wait_for_selector(f'tr[data-schedule="{schedule}"]', state="detached")
    assert system.graphql("{ schedules { id } }")["data"]["schedules"] == []


def test_search_automations_and_change_a_limit(page: Any, system: System) -> None:
    go(page, "automacoes")
    page.fill("input[type=search]", "cnd federal")
    first = page.locator("tbody tr[data-automation]").first
    page.wait_for_function(
        "() => document.querySelector('#catalogo-title')?.textContent.includes('resultado')"
    )
    assert first.get_attribute("data-automation") == "cnd_federal"
    first.locator("input[type=number]").first.fill("4")
    first.locator("input[name=tentativas]").fill("3")
    first.locator("input[name=tempo-maximo]").fill("90")
    page.click('[data-action="salvar-cnd_federal"]')
    page.wait_for_selector(".notice >> text=salva")
    query = "{ automations { key maxConcurrentJobs maxAttempts timeoutSeconds } }"
    settings = {a.pop("key"): a for a in system.graphql(query)["data"]["automations"]}
    assert settings["cnd_federal"] == {"maxConcurrentJobs": 4, "maxAttempts": 3, "timeoutSeconds": 90}
    # Emptied, the time limit goes away.
    page.locator('tr[data-automation="cnd_federal"] input[name=tempo-maximo]').fill("")
    # The console sends a document it sent before by its hash alone: the save is told by its variables.
    with page.expect_response(lambda r: '"timeout":0' in (r.request.post_data or "")) as saved:
        page.click('[data-action="salvar-cnd_federal"]')
    assert saved.value.ok
    settings = {a.pop("key"): a for a in system.graphql(query)["data"]["automations"]}
    assert settings["cnd_federal"] == {"maxConcurrentJobs": 4, "maxAttempts": 3, "timeoutSeconds": None}
    # Another operator disables it and sets a time limit while this page shows the row as it was
    # (read afresh here): saving only the attempts leaves the other operator's change alone.
    page.reload()
    page.wait_for_selector('tr[data-automation="cnd_federal"] input[name=tentativas]')
    system.graphql(
        'mutation { updateAutomationSettings(key: "cnd_federal", enabled: false, timeoutSeconds: 30) '
        "{ key } }"
    )
    page.locator('tr[data-automation="cnd_federal"] input[name=tentativas]').fill("5")
    with page.expect_response(lambda r: '"attempts":5' in (r.request.post_data or "")) as saved:
        page.click('[data-action="salvar-cnd_federal"]')
    assert saved.value.ok
    query = "{ automations { key enabled maxAttempts timeoutSeconds } }"
    settings = {a.pop("key"): a for a in system.graphql(query)["data"]["automations"]}
    assert settings["cnd_federal"] == {"enabled": False, "maxAttempts": 5, "timeoutSeconds": 30}
    system.graphql('mutation { updateAutomationSettings(key: "cnd_federal", enabled: true) { key } }')
