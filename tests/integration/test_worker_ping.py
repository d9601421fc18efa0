"""``worker-automation ping -Q QUEUE``, the pool worker services' health check: it succeeds while
this host's worker for the queue answers through the broker, and fails for a queue none serves."""

from __future__ import annotations

import subprocess

from tests.integration.harness import Stack, clean_env, cli_command


def test_ping_answers_for_a_consuming_worker_of_this_host_only(stack: Stack) -> None:
    env = clean_env(
        WA_REDIS_URL=stack.redis_url,
        WA_API_URL=stack.api_url,
        WA_WORKER_API_KEY=stack.register_machine(queue="scan"),
    )
    # Named as compose's services are, by default: QUEUE-PID@HOST.
    worker = stack.procs.start(
        "worker-scan", [*cli_command(), "worker", "-Q", "scan", "-c", "1"], env, stack.workdir
    )
    worker.wait_for_output(" ready.")

    def ping(queue: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli_command(), "ping", "-Q", queue, "--timeout", "2"],
            env=clean_env(WA_REDIS_URL=stack.redis_url),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    answered = ping("scan")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip().endswith(": pong") and "scan-" in answered.stdout
    silent = ping("certidao")
    assert silent.returncode == 1 and "no pool worker for certidao" in silent.stderr
