"""Pool workers started by an embedded ``serve``: one Celery worker process per queue.

They get the settings of ``serve`` that a pool worker reads (log format, result limit, queues...),
so that, for instance, ``WA_LOG_FORMAT=json`` holds for every line ``serve`` and its workers write;
and ``serve`` counts as ready only once every one of them answers a ping through the broker.
Each forks its pool processes only while it has jobs (``pool_on_demand``): seven pool processes
waiting for work were a third of what an idle ``serve`` held.

Why: docs/decisions/0024-pool-processes-on-demand.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import worker_automation
from worker_automation.process.bootstrap import embedded_key_file, kept_machine_key
from worker_automation.resolvers.audit import Actor
from worker_automation.resolvers.machines import machine_named
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings
from worker_automation.worker.launch_spec import POOL_VARIABLE

log = logging.getLogger(__name__)
# The settings of serve a pool worker reads besides those the pool sets itself (broker, API, key).
WORKER_SETTINGS: Final = (
    "log_format",
    "max_result_bytes",
    "max_context_bytes",
    "task_events",
    "queues",
    "redis_prefix",
    "timezone",
)
# Settings a pool worker never gets: a machine needs only the API's address and its own key.
WITHHELD: Final = ("WA_DATABASE_URL", "WA_API_KEY", "WA_WORKER_API_KEY_FILE")
# How long serve waits for its pool workers to answer before saying so (it goes on waiting).
READY_PATIENCE_SECONDS: Final = 60.0
PING_TIMEOUT_SECONDS: Final = 0.5
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


def node_name(queue: str) -> str:
    """The Celery node name of the queue's worker (unique per serve: its pid)."""
    return f"embedded-{queue}-{os.getpid()}@{socket.gethostname()}"


# The command that forks every queue's worker (or, given a command line, runs one worker).
POOL_ENTRY: Final = (sys.executable, "-P", "-m", "worker_automation.cli.embedded_worker")


def pool_worker_command(queue: str, count: int) -> list[str]:
    """The pool worker's command line. ``-P`` keeps the working directory off ``sys.path``: a
    ``worker_automation`` folder there (a source checkout) must not shadow the API's code."""
    return [*POOL_ENTRY, "worker", "-Q", queue, "-c", str(count), "-n", node_name(queue)]


def setting_value(value: object) -> str:
    """A setting as its ``WA_*`` variable spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def pool_worker_env(settings: Settings, **values: str) -> dict[str, str]:
    """This process's environment with the settings a pool worker reads taken from ``settings``
    (which may not come from the environment at all), then ``values``."""
    env = {k: v for k, v in os.environ.items() if k not in WITHHELD}
    for name in WORKER_SETTINGS:
        env[f"WA_{name.upper()}"] = setting_value(getattr(settings, name))
    env.update(values)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [API_CODE_ROOT, env.get("PYTHONPATH")]))
    return env


class EmbeddedPool:
    """Registers a machine per queue (its key kept between starts) and supervises its worker
    process."""

    def __init__(self, services: Services) -> None:
        self.services = services
        # One process forks every queue's worker (see cli.embedded_worker).
        self.process: subprocess.Popen[bytes] | None = None
        self.queues: list[str] = []

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

    @property
    def grace_seconds(self) -> float:
        """How long a job still running when serve stops has to finish."""
        return min(self.services.settings.shutdown_grace_seconds, EMBEDDED_GRACE_SECONDS)

    async def start(self) -> None:
        settings = self.services.settings
        workers = {
            queue: {
                "argv": pool_worker_command(queue, count)[len(POOL_ENTRY) :],
                "env": {"WA_WORKER_API_KEY": await self._key_for(queue)},
            }
            for queue, count in settings.queues.items()
        }
        env = pool_worker_env(
            settings,
            WA_REDIS_URL=self.services.redis_url,
            WA_API_URL=settings.api_url,
            WA_SHUTDOWN_GRACE_SECONDS=str(self.grace_seconds),
            # Killed with serve, however serve ends (kill -9 included): a worker outliving it
            # would go on with jobs the next serve marks failed and runs again.
            WA_EXIT_WITH_PARENT=str(os.getpid()),
            # Pool processes only while there is work: most of an idle serve's memory.
            WA_POOL_ON_DEMAND="true",
            **{POOL_VARIABLE: json.dumps(workers)},
        )
        # A session of its own: Ctrl-C in the terminal reaches serve, which stops them in order.
        self.process = subprocess.Popen(POOL_ENTRY, env=env, start_new_session=True)  # noqa: ASYNC220
        self.queues = list(workers)
        log.info("pool workers for %s started (pid %d)", ", ".join(self.queues), self.process.pid)

    async def wait_ready(self) -> None:
        """Return once every pool worker answers a ping through the broker (Celery answers only
        once its worker is consuming). Says so when that takes long, and goes on waiting."""
        waiting = {node_name(queue) for queue in self.queues}
        control = self.services.broker.app.control
        started = time.monotonic()
        warned = False
        while waiting:
            replies = await asyncio.to_thread(
                control.ping, destination=sorted(waiting), timeout=PING_TIMEOUT_SECONDS
            )
            for reply in replies or []:
                waiting.difference_update(reply)
            if waiting and not warned and time.monotonic() - started > READY_PATIENCE_SECONDS:
                log.warning("still waiting for pool workers: %s", ", ".join(sorted(waiting)))
                warned = True

    async def stop(self) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            # Said before the wait, or a silent terminal looks hung: a worker stops once its
            # blocking pop on the broker has returned (BROKER_WAIT_SECONDS when idle) and its job
            # has ended (up to the grace).
            log.info("stopping the pool workers; a job still running has %g s to finish", self.grace_seconds)
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, EMBEDDED_GRACE_SECONDS + 10.0)
        except subprocess.TimeoutExpired:
            log.warning("pool workers did not stop in time; killing them")
            os.killpg(process.pid, signal.SIGKILL)
            await asyncio.to_thread(process.wait)
        self.process = None
