"""Pool workers started by an embedded ``serve``: one Celery worker process per queue."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import worker_automation
from worker_automation.bootstrap import embedded_key_file, kept_machine_key
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.machines import machine_named
from worker_automation.services import Services

log = logging.getLogger(__name__)
EMBEDDED_ACTOR = Actor("serve:embedded", "administrador")
# Ctrl-C should not keep a developer waiting two minutes; running jobs still end reported.
EMBEDDED_GRACE_SECONDS = 10.0


def machine_name(queue: str) -> str:
    return f"embedded-{queue}"


async def embedded_machine_ids(services: Services) -> list[int]:
    """The machines an embedded ``serve``'s pool workers run as (registered at a first start)."""
    found = [await machine_named(services.db, machine_name(queue)) for queue in services.settings.queues]
    return [machine.id for machine in found if machine is not None]


# Where the API's own package was imported from: its pool workers import the same code.
API_CODE_ROOT = str(Path(worker_automation.__file__).resolve().parent.parent)


def pool_worker_command(queue: str, count: int) -> list[str]:
    """The pool worker's command line. ``-P`` keeps the working directory off ``sys.path``: a
    ``worker_automation`` folder there (a source checkout) must not shadow the API's code."""
    return [sys.executable, "-P", "-m", "worker_automation.cli", "worker", "-Q", queue, "-c", str(count)]


class EmbeddedPool:
    """Registers a machine per queue (its key kept between starts) and supervises its worker
    process."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    async def _key_for(self, queue: str) -> str:
        # Kept in the directory between starts: a restart with nothing changed rotates no key.
        kept = await kept_machine_key(
            self.services.db,
            EMBEDDED_ACTOR,
            self.services.settings.queues,
            name=machine_name(queue),
            queue=queue,
            path=embedded_key_file(queue),
        )
        return kept.key

    async def start(self) -> None:
        settings = self.services.settings
        grace = min(settings.shutdown_grace_seconds, EMBEDDED_GRACE_SECONDS)
        for queue, count in settings.queues.items():
            env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
            env.update(
                WA_REDIS_URL=self.services.redis_url,
                WA_API_URL=settings.api_url,
                WA_WORKER_API_KEY=await self._key_for(queue),
                WA_SHUTDOWN_GRACE_SECONDS=str(grace),
                WA_TIMEZONE=settings.timezone,
                # Killed with serve, however serve ends (kill -9 included): a worker outliving
                # it would go on with jobs the next serve marks failed and runs again.
                WA_EXIT_WITH_PARENT=str(os.getpid()),
            )
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [API_CODE_ROOT, env.get("PYTHONPATH")]))
            command = pool_worker_command(queue, count)
            # A session of its own: Ctrl-C in the terminal reaches serve, which stops them in order.
            self.processes[queue] = subprocess.Popen(command, env=env, start_new_session=True)  # noqa: ASYNC220
            log.info("pool worker for %s started (pid %d)", queue, self.processes[queue].pid)

    async def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = EMBEDDED_GRACE_SECONDS + 10.0
        for queue, process in self.processes.items():
            try:
                await asyncio.to_thread(process.wait, deadline)
            except subprocess.TimeoutExpired:
                log.warning("pool worker for %s did not stop in time; killing it", queue)
                os.killpg(process.pid, signal.SIGKILL)
                await asyncio.to_thread(process.wait)
        self.processes.clear()
