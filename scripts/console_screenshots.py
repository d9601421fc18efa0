"""Take the README's pictures of the operator console: one PNG per page under ``docs/console/``.

Run from the repository root with the project installed (``pip install -e ".[test]"``) and
Debian's chromium at /usr/bin/chromium:

    python scripts/console_screenshots.py [--out docs/console]

It starts ``worker-automation serve`` in embedded mode in a temporary directory, fills it with
demo data (``seed-demo``) and a few live jobs (one running, one failed), signs in with a new
administrator key, and photographs each page at 1280x860. Nothing outside the temporary
directory is touched but the output folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ADMIN_SCOPES = "worker_automation:read,worker_automation:write"
PAGES = [
    ("visao-geral", ""),
    ("trabalhos", "trabalhos"),
    ("trabalho", "trabalhos/{failed}"),
    ("filas", "filas"),
    ("maquinas", "maquinas"),
    ("automacoes", "automacoes"),
    ("agendamentos", "agendamentos"),
    ("auditoria", "auditoria"),
]


def cli() -> list[str]:
    script = Path(sys.executable).with_name("worker-automation")
    return [str(script)] if script.exists() else [sys.executable, "-m", "worker_automation.cli"]


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([*cli(), *args], env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def graphql(url: str, key: str, query: str, variables: dict[str, Any] | None = None) -> Any:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = Request(
        f"{url}/graphql", body, {"Content-Type": "application/json", "X-API-Key": key}, method="POST"
    )
    with urlopen(request, timeout=15) as response:
        answer = json.loads(response.read())
    if "errors" in answer:
        raise SystemExit(f"API refused {query!r}: {answer['errors']}")
    return answer["data"]


def dispatch(url: str, key: str, automation: str, context: dict[str, Any]) -> int:
    query = "mutation($i: DispatchInput!) { dispatchAutomation(input: $i) { id } }"
    data = graphql(url, key, query, {"i": {"automationType": automation, "context": context}})
    return int(data["dispatchAutomation"]["id"])


def wait_status(url: str, key: str, job: int, status: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    query = "query($id: Int!) { worker(id: $id) { status } }"
    while graphql(url, key, query, {"id": job})["worker"]["status"] != status:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job} never {status}")
        time.sleep(0.3)


def wait_ready(url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            with urlopen(f"{url}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        time.sleep(0.3)
    raise SystemExit(f"{url} did not become ready")


def photograph(url: str, key: str, failed: int, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860}, locale="pt-BR")
            page.goto(f"{url}/console/")
            page.fill("#api-key", key)
            page.click("button[type=submit]")
            page.wait_for_selector('[data-connection="conectado"]')
            for name, path in PAGES:
                page.evaluate("(hash) => { window.location.hash = hash; }", "#/" + path.format(failed=failed))
                page.wait_for_selector("main h1")
                page.wait_for_function("() => !document.querySelector('[aria-busy=\"true\"]')")
                page.wait_for_timeout(1200)
                # The job page in full: its attempts and audit entries are below the fold.
                page.screenshot(path=str(out / f"{name}.png"), full_page=(name == "trabalho"))
                print(f"{out / name}.png")
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(ROOT / "docs" / "console"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="wa-console-shots-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
    serve: subprocess.Popen[bytes] | None = None
    try:
        run_cli(["seed-demo", "--jobs", "600", "--clientes", "25"], env, workdir)
        key = run_cli(
            ["keys", "create", "--perfil", "administrador", "--scopes", ADMIN_SCOPES, "--name", "operadora"],
            env,
            workdir,
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with (workdir / "serve.log").open("wb") as log:
            serve = subprocess.Popen(
                [*cli(), "serve", "--port", str(port)],
                env=env,
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_ready(url)
        failed = dispatch(url, key, "demo.fail", {"message": "Portal da Receita fora do ar (HTTP 503)"})
        dispatch(url, key, "demo.echo", {"cnpj": "12345678000190"})
        # A second run of the failed job, so its page shows two attempts.
        wait_status(url, key, failed, "FALHA")
        graphql(url, key, "mutation($id: Int!) { retryWorker(id: $id) { id } }", {"id": failed})
        wait_status(url, key, failed, "FALHA")
        dispatch(url, key, "demo.sleep", {"seconds": 90})
        with contextlib.suppress(SystemExit):  # an API without schedules shows "indisponível"
            schedule = {"automationType": "demo.echo", "cron": "0 6 * * 1-5", "context": {"origem": "agenda"}}
            create = "mutation($i: ScheduleInput!) { createSchedule(input: $i) { id } }"
            graphql(url, key, create, {"i": schedule})
        with contextlib.suppress(SystemExit):  # a paused queue, as the queues page shows it
            graphql(url, key, 'mutation { pauseQueue(queue: "observer") { paused } }')
        time.sleep(3)
        photograph(url, key, failed, out)
    finally:
        if serve is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(serve.pid, signal.SIGTERM)
            try:
                serve.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(serve.pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
