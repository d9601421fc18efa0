"""Schemathesis over the whole OpenAPI document of a running ``serve``, as a user would run it.

One embedded ``serve`` (SQLite, embedded broker and workers) on a free port, an operator key with
read and write and a machine key made with the CLI, some demo jobs, then the ``schemathesis`` CLI
with every check on and both keys on every request (each route reads the one it takes). Path ids
are drawn half of the time from the jobs that exist, so the operations on a job reach their rules
instead of stopping at 404. The JSON report gives the figures: cases run, failures by check,
errors, and the server's own log is read for tracebacks.

Shared by the CI test (a few hundred cases) and ``bench.api_fuzz`` (thousands).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tests.integration.harness import Proc, clean_env, cli_command, free_port, run_cli, wait_ready

DOC_PATH = "/api/v1/openapi.json"
OPERATOR_SCOPES = "worker_automation:read,worker_automation:write"
# How the API is meant to be called: unknown query parameters are ignored (as the documented
# routes always did), and the keys are the run's own, sent with each call, not generated. A
# dispatch checks a context against its automation's form, which a JSON Schema cannot say all of
# (CNPJ check digits, dates in range): a schema-valid context may still be a 422 there. Likewise a
# move names a queue other than the job's own, which depends on the job: moving a job to the queue
# it is in is a 422 naming target_queue.
CONFIG = """
[generation]
allow-extra-parameters = false
with-security-parameters = false

[dictionaries.jobs]
values = [{ids}]

[parameters]
"path.job_id" = {{ dictionary = "jobs", probability = 0.5 }}
"path.worker_id" = {{ dictionary = "jobs", probability = 0.5 }}

[[operations]]
include-path-regex = "^/api/v1/jobs(/batch)?$"
checks.positive_data_acceptance.expected-statuses = ["2XX", "401", "403", "409", "422", "503"]

[[operations]]
include-path-regex = "/move$"
checks.positive_data_acceptance.expected-statuses = ["2XX", "401", "403", "404", "409", "422", "429", "503"]
"""
# What the server logs for a request it could not answer.
SERVER_FAULTS = ("Traceback", "unhandled error")


class Starter(Protocol):
    """What starts a process and keeps it for stopping (the tests' and the benchmarks' sets)."""

    def start(self, name: str, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> Proc: ...


@dataclass
class Served:
    """A ``serve`` in embedded mode and the environment its CLI commands need."""

    proc: Proc
    url: str
    env: dict[str, str]
    directory: Path

    def cli(self, *args: str) -> str:
        return run_cli(args, self.env, self.directory)


@dataclass
class FuzzRun:
    """What one schemathesis run found."""

    cases: int
    with_failures: int
    failures: dict[str, int]
    errors: list[str]
    seconds: float
    phases: dict[str, str]
    server_faults: list[str] = field(default_factory=list)

    @property
    def server_errors(self) -> int:
        """Answers with a 5xx status (schemathesis's ``not_a_server_error`` check)."""
        return sum(n for name, n in self.failures.items() if name.startswith("ServerError"))


def serve_embedded(starter: Starter, directory: Path) -> Served:
    """``worker-automation serve`` on a SQLite file in ``directory``, ready."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(
        WA_DATABASE_URL=f"sqlite+aiosqlite:///{directory / 'wa.db'}",
        WA_API_URL=url,
        # Broker inspection waits this long for workers' replies: fuzzing calls it often.
        WA_INSPECT_TIMEOUT_SECONDS="0.5",
    )
    command = [*cli_command(), "serve", "--port", str(port), "--log-level", "warning"]
    proc = starter.start("serve", command, env, directory)
    wait_ready(url, proc, timeout=120)
    return Served(proc, url, env, directory)


def prepare(served: Served, jobs: int) -> dict[str, str]:
    """Both keys (as headers) and ``jobs`` demo jobs, ids 1..jobs."""
    operator = served.cli("keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES)
    machine = served.cli("machines", "register", "--name", "fuzz-machine", "--queue", "scan")
    served.cli("seed-demo", "--jobs", str(jobs), "--clientes", "4")
    return {"X-API-Key": operator, "X-Worker-Api-Key": machine}


def fuzz(
    served: Served,
    headers: Mapping[str, str],
    job_ids: Sequence[int],
    *,
    max_examples: int,
    seed: int,
    # One thread: hypothesis describes its filters with ``ast.parse``, which CPython 3.11 can fail
    # with "AST constructor recursion depth mismatch" when threads parse at once.
    workers: int = 1,
    phases: str = "examples,coverage,fuzzing,stateful",
    timeout: float = 3600,
) -> FuzzRun:
    """One schemathesis run over the whole document; its figures."""
    config = served.directory / "schemathesis.toml"
    config.write_text(CONFIG.format(ids=", ".join(str(i) for i in job_ids)), encoding="utf-8")
    report = served.directory / "schemathesis-report.json"
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        served.url + DOC_PATH,
        "--checks",
        "all",
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--workers",
        str(workers),
        "--phases",
        phases,
        "--request-timeout",
        "30",
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    log = served.directory / "schemathesis.log"
    started = time.monotonic()
    with log.open("wb") as out:
        subprocess.run(
            command, cwd=served.directory, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
        )
    seconds = time.monotonic() - started
    if not report.exists():
        raise AssertionError(f"schemathesis wrote no report:\n{log.read_text()[-4000:]}")
    return _read(json.loads(report.read_text()), seconds, served.proc.output())


def _read(data: dict[str, Any], seconds: float, server_log: str) -> FuzzRun:
    cases = data["test_cases"]
    failures = {f"{f['type']} ({f['code']})": int(f["count"]) for f in data.get("failures", [])}
    errors = [str(e.get("title") or e.get("message") or e) for e in data.get("errors", [])]
    faults = [line for line in server_log.splitlines() if any(mark in line for mark in SERVER_FAULTS)]
    return FuzzRun(
        cases=int(cases["generated"]),
        with_failures=int(cases["with_failures"]),
        failures=failures,
        errors=errors,
        seconds=seconds,
        phases={name: str(phase["status"]) for name, phase in data["phases"].items()},
        server_faults=faults,
    )
