"""A pool worker logging JSON: every line it writes is a JSON object, Celery's included, and each
run is said once by our line (job, automation, outcome, time), never as a task that "succeeded",
with nothing the job carried (its context, its failure message), and no word from the autoscaler
at each burst."""

from __future__ import annotations

import json

from tests.integration.harness import Stack, clean_env, cli_command, wait_until
from worker_automation.worker.celery_logging import JOBS_LOGGER

CONTEXT_SECRET = "valor-do-contexto-7781"
FAILURE_SECRET = "mensagem-de-falha-5521"


def test_a_json_pool_worker_says_each_run_once_and_nothing_the_job_carried(stack: Stack) -> None:
    env = clean_env(
        WA_REDIS_URL=stack.redis_url,
        WA_API_URL=stack.api_url,
        WA_WORKER_API_KEY=stack.register_machine(queue="scan"),
        WA_LOG_FORMAT="json",
        # Pool processes forked for the jobs and let go after: the autoscaler says nothing of it.
        WA_POOL_ON_DEMAND="true",
    )
    args = [*cli_command(), "worker", "-Q", "scan", "-c", "1", "-n", f"json-scan-{stack.port}@test"]
    worker = stack.procs.start("worker-json", args, env, stack.workdir)
    worker.wait_for_output(" ready.")

    done = stack.dispatch("demo.echo", {"segredo": CONTEXT_SECRET})
    failed = stack.dispatch("demo.fail", {"message": f"{FAILURE_SECRET} {CONTEXT_SECRET}"})
    stack.wait_status(done, "CONCLUIDO", 30)
    stack.wait_status(failed, "FALHA", 30)

    def outcome_lines() -> list[dict[str, str]] | None:
        entries = [json.loads(line) for line in worker.output().splitlines() if line.strip()]
        said = [e for e in entries if e["logger"] == JOBS_LOGGER]
        return said if len(said) >= 2 else None

    said = wait_until(outcome_lines, 15, lambda: f"no outcome lines in:\n{worker.output()}")
    assert [(e["level"], e["message"].split(" in ")[0]) for e in said] == [
        ("INFO", f"job {done} (demo.echo): completed"),
        ("WARNING", f"job {failed} (demo.fail): failed"),
    ]
    output = worker.output()
    # Every line is one JSON object (json.loads above read each of them).
    assert all(line.startswith("{") for line in output.splitlines() if line.strip())
    assert "succeeded" not in output
    assert "Scaling" not in output
    assert CONTEXT_SECRET not in output and FAILURE_SECRET not in output
