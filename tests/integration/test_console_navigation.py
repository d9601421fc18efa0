"""The console in chromium: a filtered job list kept live, the address as the list's state, actions
clicked while the API is down, and where focus lands on a new page.

One embedded ``serve`` for the module, killed and started again on the same port by the outage
test; each test opens its own tab.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_console_browser import (
    AXE,
    AXE_RUN,
    JOB_STEP,
    System,
    embedded_console,
    open_console,
)
from tests.integration.test_graphiql_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser

ROW_STEP = JOB_STEP * 1000  # ms: a row reaching a state
DEV_MODE = 'mutation($dev: Boolean) { updateAutomationSettings(key: "demo.echo", devMode: $dev) { key } }'


system = embedded_console("console-navigation")


@pytest.fixture(scope="module")
def browser(system: System) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, system: System) -> Iterator[Any]:
    tab = open_console(browser, system)
    yield tab
    errors = list(tab.errors)
    tab.context.close()
    assert errors == [], errors


def jobs_at(page: Any, query: str) -> None:
    """Open Trabalhos at ``#/trabalhos?query`` (as a typed address) and wait until it is live."""
    page.evaluate("(hash) => { window.location.hash = hash; }", f"#/trabalhos?{query}")
    page.wait_for_selector('main[data-route="trabalhos"] [data-live="1"]')


def row(job: int, status: str | None = None) -> str:
    return f'tr[data-id="{job}"]' + (f'[data-status="{status}"]' if status else "")


def act(system: System, action: str, job: int) -> None:
    body = system.graphql(f"mutation($id: Int!) {{ {action}(id: $id) {{ id }} }}", {"id": job})
    assert "errors" not in body, body


def shown_total(page: Any) -> int:
    return int(page.inner_text("#jobs-count").split()[0].replace(".", ""))


def test_a_list_filtered_by_status_takes_in_jobs_that_reach_it_and_lets_go_of_those_that_leave(
    page: Any, system: System
) -> None:
    jobs_at(page, "status=FALHA")
    before = shown_total(page)
    done = system.dispatch("demo.echo", {"fica": "fora"})
    failed = system.dispatch("demo.fail", {"message": "Portal fora do ar"})
    page.wait_for_selector(row(failed, "FALHA"), timeout=ROW_STEP)
    assert shown_total(page) == before + 1
    system.wait_status(done, "CONCLUIDO")
    assert page.query_selector(row(done)) is None
    # Retried, it is queued again: it leaves the list, and comes back when it fails again. Its
    # queue is paused meanwhile, so the retry waits AGENDADO: run at once, it may fail again
    # before the page has drawn it queued, and the list would rightly show it FALHA all along.
    paused = system.graphql('mutation { pauseQueue(queue: "scan") { paused } }')
    assert "errors" not in paused, paused
    try:
        act(system, "retryWorker", failed)
        page.wait_for_selector(row(failed, "FALHA"), state="detached", timeout=ROW_STEP)
    finally:
        resumed = system.graphql('mutation { resumeQueue(queue: "scan") { paused } }')
    assert "errors" not in resumed, resumed
    page.wait_for_selector(row(failed, "FALHA"), timeout=ROW_STEP)

    # The other filters the same way: a running job enters the running list and leaves it when done.
    jobs_at(page, "status=EXECUTANDO")
    running = system.dispatch("demo.sleep", {"seconds": 2})
    page.wait_for_selector(row(running, "EXECUTANDO"), timeout=ROW_STEP)
    page.wait_for_selector(row(running), state="detached", timeout=ROW_STEP)
    jobs_at(page, "status=CONCLUIDO")
    finished = system.dispatch("demo.echo", {"vai": "concluir"})
    page.wait_for_selector(row(finished, "CONCLUIDO"), timeout=ROW_STEP)
    jobs_at(page, "status=CANCELADO")
    long = system.dispatch("demo.sleep", {"seconds": 120})
    system.wait_status(long, "EXECUTANDO")
    act(system, "cancelWorker", long)
    page.wait_for_selector(row(long, "CANCELADO"), timeout=ROW_STEP)
    # Newest first, as the list is read.
    ids = page.eval_on_selector_all("tbody tr", "rows => rows.map(r => Number(r.dataset.id))")
    assert ids == sorted(ids, reverse=True)


def test_a_changed_address_applies_its_filter_typed_or_by_going_back(page: Any, system: System) -> None:
    failed = system.dispatch("demo.fail", {"message": "endereço"})
    done = system.dispatch("demo.echo", {"endereço": True})
    system.wait_status(failed, "FALHA")
    system.wait_status(done, "CONCLUIDO")
    jobs_at(page, "status=FALHA")
    page.wait_for_selector(row(failed))
    assert page.query_selector(row(done)) is None
    # Typed in the address bar: the same document, only the hash changes.
    page.goto(f"{system.url}/console/#/trabalhos?status=CONCLUIDO")
    page.wait_for_selector(row(done))
    page.wait_for_selector(row(failed), state="detached")
    assert page.eval_on_selector('form.filters select[name="status"]', "s => s.value") == "CONCLUIDO"
    page.go_back()
    page.wait_for_selector(row(failed))
    page.wait_for_selector(row(done), state="detached")
    assert page.eval_on_selector('form.filters select[name="status"]', "s => s.value") == "FALHA"
    page.go_forward()
    page.wait_for_selector(row(done))
    page.wait_for_selector(row(failed), state="detached")
    # No filter at all is a filter too.
    page.evaluate("() => { window.location.hash = '#/trabalhos'; }")
    page.wait_for_selector(row(failed))
    page.wait_for_selector(row(done))
    assert page.eval_on_selector('form.filters select[name="status"]', "s => s.value") == ""
    # A filter chosen in the form is a step of the history too: Back returns to the list before it.
    page.select_option('form.filters select[name="status"]', "FALHA")
    page.click('form.filters button[type="submit"]')
    page.wait_for_selector(row(done), state="detached")
    assert page.evaluate("() => window.location.hash") == "#/trabalhos?status=FALHA"
    page.go_back()
    page.wait_for_selector(row(done))
    assert page.evaluate("() => window.location.hash") == "#/trabalhos"
    assert page.eval_on_selector('form.filters select[name="status"]', "s => s.value") == ""
    page.go_forward()
    page.wait_for_selector(row(done), state="detached")
    page.wait_for_selector(row(failed))


def audit_actions(system: System, job: int) -> list[str]:
    query = (
        "query($t: String!) { auditLog(filter: { target: $t }, perPage: 100) { items { action result } } }"
    )
    items = system.graphql(query, {"t": f"worker:{job}"})["data"]["auditLog"]["items"]
    return [f"{item['action']}:{item['result']}" for item in items]


def echo_jobs(system: System) -> int:
    body = system.graphql('{ workers(filter: { automationType: "demo.echo" }) { total } }')
    return int(body["data"]["workers"]["total"])


def test_an_action_clicked_while_the_api_is_down_is_sent_once_when_it_is_back(
    page: Any, system: System
) -> None:
    assert "errors" not in system.graphql(DEV_MODE, {"dev": True})  # queued jobs stay queued
    try:
        job = system.dispatch("demo.echo", {"fica": "na fila"})
        created = system.graphql(
            "mutation($i: ScheduleInput!) { createSchedule(input: $i) { id } }",
            {"i": {"automationType": "demo.echo", "cron": "0 6 * * 1-5", "context": {"origem": "agendado"}}},
        )
        schedule = created["data"]["createSchedule"]["id"]
        page.evaluate("(hash) => { window.location.hash = hash; }", f"#/trabalhos/{job}")
        page.wait_for_selector('.job-head [data-status="AGENDADO"]', timeout=ROW_STEP)

        system.serve.kill()
        page.wait_for_selector('[data-connection="reconectando"]')
        page.click('[data-action="Cancelar"]')
        page.wait_for_selector('[data-waiting="1"]')
        assert "enviada de novo" in page.inner_text('[data-waiting="1"]')
        system.start_serve()
        page.wait_for_selector('.job-head [data-status="CANCELADO"]', timeout=ROW_STEP)
        assert system.status(job)["status"] == "CANCELADO"
        assert audit_actions(system, job).count("cancel:ok") == 1, audit_actions(system, job)
        assert [a for a in audit_actions(system, job) if a.startswith("cancel")] == ["cancel:ok"]

        # Running a schedule now is not safe to repeat: nothing is sent by itself, a button is offered.
        page.evaluate("() => { window.location.hash = '#/agendamentos'; }")
        run_now = f'[data-action="executar-{schedule}"]'
        page.wait_for_selector(run_now)
        before = echo_jobs(system)
        system.serve.kill()
        page.wait_for_selector('[data-connection="reconectando"]')
        page.click(run_now)
        again = f'[data-action="executar-{schedule}-de-novo"]'
        page.wait_for_selector(again)
        assert "pode não ter sido feita" in page.inner_text(f'{run_now} >> xpath=.. >> [role="alert"]')
        system.start_serve()
        page.wait_for_selector('[data-connection="conectado"]', timeout=ROW_STEP)
        assert echo_jobs(system) == before
        page.click(again)
        page.wait_for_selector(".notice >> text=criado")
        assert echo_jobs(system) == before + 1
        assert page.query_selector(again) is None
    finally:
        if not system.serve.alive():
            system.start_serve()
        system.graphql(DEV_MODE, {"dev": False})


def focused(page: Any) -> str:
    return str(
        page.evaluate(
            "() => { const e = document.activeElement;"
            " return `${e.tagName.toLowerCase()}:${e.textContent.trim()}`; }"
        )
    )


def test_a_new_page_puts_focus_on_its_heading(page: Any, system: System) -> None:
    for path, heading in (("filas", "Filas"), ("maquinas", "Máquinas"), ("trabalhos", "Trabalhos")):
        page.click(f'nav a[href="#/{path}"]')
        page.wait_for_selector(f'main[data-route="{path}"] h1')
        page.wait_for_function(
            "(text) => document.activeElement?.matches('main h1')"
            " && document.activeElement.textContent === text",
            arg=heading,
        )
        assert page.get_attribute("main h1", "tabindex") == "-1"
    # By keyboard too: a link followed with Enter.
    page.focus('nav a[href="#/automacoes"]')
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.activeElement?.matches('main h1')")
    assert focused(page) == "h1:Automações"
    # The skip link goes to the content without leaving the page.
    page.focus("a.skip")
    page.keyboard.press("Enter")
    assert page.evaluate("() => window.location.hash") == "#/automacoes"
    assert focused(page) == "h1:Automações"
    # A filter applied on the same page leaves focus where the operator was.
    page.click('nav a[href="#/trabalhos"]')
    page.wait_for_selector('main[data-route="trabalhos"] [data-live="1"]')
    page.select_option('form.filters select[name="status"]', "FALHA")
    page.click('form.filters button[type="submit"]')
    page.wait_for_function("() => window.location.hash.includes('status=FALHA')")
    assert focused(page) == "button:Filtrar"
    if not page.evaluate("() => Boolean(window.axe)"):
        page.add_script_tag(path=str(Path(AXE)))
    assert page.evaluate(AXE_RUN) == []
