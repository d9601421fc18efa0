"""The API process's run-time: starts services (and, embedded, the pool workers) once."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from worker_automation.broker import queues
from worker_automation.broker.gateway import BROKER_ERRORS
from worker_automation.resolvers.automations import ensure_settings_rows
from worker_automation.services import Services
from worker_automation.settings import Settings

log = logging.getLogger(__name__)
GC_THRESHOLDS = (50_000, 20, 100)


def broker_state_file() -> Path:
    """Where an embedded ``serve`` leaves its broker address for commands run beside it."""
    return Path.cwd() / ".worker-automation-broker"


def queued_messages_file() -> Path:
    """Where an embedded ``serve`` keeps the messages still queued when it stopped, for the next
    start (its broker lives in memory)."""
    return Path.cwd() / ".worker-automation-queued.json"


def _write_queued(path: Path, waiting: dict[str, list[bytes]]) -> None:
    if not waiting:
        path.unlink(missing_ok=True)
        return
    path.write_text(json.dumps({key: [m.decode() for m in messages] for key, messages in waiting.items()}))


def _read_queued(path: Path) -> dict[str, list[bytes]]:
    if not path.exists():
        return {}
    saved = json.loads(path.read_text())
    return {key: [m.encode() for m in messages] for key, messages in saved.items()}


async def save_queued(services: Services, path: Path) -> int:
    """Write the task messages waiting in the embedded broker to ``path``; how many."""
    waiting = await queues.waiting_messages(services.broker.redis, services.settings.queues)
    await asyncio.to_thread(_write_queued, path, waiting)
    return sum(len(messages) for messages in waiting.values())


async def restore_queued(services: Services, path: Path) -> int:
    """Queue again what :func:`save_queued` wrote (the file is removed); how many."""
    saved = await asyncio.to_thread(_read_queued, path)
    restored = await queues.put_back(services.broker.redis, saved) if saved else 0
    await asyncio.to_thread(path.unlink, missing_ok=True)
    return restored


class Runtime:
    """Holds the process's :class:`Services`; started by the app's lifespan (or on first use)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._services: Services | None = None
        self._lock = asyncio.Lock()
        self._pool: Any = None
        self._queued_saved = False

    async def services(self) -> Services:
        if self._services is None:
            async with self._lock:
                if self._services is None:
                    self._services = await self._start()
        return self._services

    async def _start(self) -> Services:
        services = await Services.start(self.settings)
        await ensure_settings_rows(services.db)
        return services

    async def start_pool_workers(self) -> None:
        """Embedded mode: Celery pool workers for every queue, as separate processes."""
        from worker_automation.worker.embedded_pool import EmbeddedPool

        services = await self.services()
        self._pool = EmbeddedPool(services)
        await self._pool.start()

    async def drain(self) -> None:
        """Before the API stops listening: stop the embedded pool workers, so the jobs they are
        running can still report how they ended (finished, or failed at the end of the grace);
        then keep what is still queued in the embedded broker for the next start."""
        if self._pool is not None:
            await self._pool.stop()
            self._pool = None
        if self.settings.redis_url is None and self._services is not None and not self._queued_saved:
            self._queued_saved = True
            try:
                kept = await save_queued(self._services, queued_messages_file())
            except (OSError, *BROKER_ERRORS) as exc:
                log.error("queued task messages could not be kept for the next start: %s", exc)
            else:
                if kept:
                    log.info("%d queued task message(s) kept for the next start", kept)

    async def close(self) -> None:
        await self.drain()
        if self._services is not None:
            await self._services.close()
            self._services = None

    @asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        await self.services()
        # Everything built so far (schema, models, modules) lives as long as the process. Left to
        # the collector, each full collection walks all of it again: 70-90 ms pauses that stall
        # every request in flight. Frozen, full collections walk only what requests allocate.
        # (Garbage is collected first, so that none of it is frozen for good.)
        gc.collect()
        gc.freeze()
        # A server holds many live objects (a thousand websocket subscribers are about a million):
        # at the default thresholds full collections still came every few seconds and took
        # 50-150 ms each. Collecting after 50,000 allocations instead of 700 makes them rare;
        # a young-generation pass then costs a few milliseconds.
        gc.set_threshold(*GC_THRESHOLDS)
        embedded = self.settings.redis_url is None
        state_file = broker_state_file()
        if embedded:
            services = await self.services()
            # Commands run beside an embedded serve (dispatch) find its broker here.
            state_file.write_text(services.redis_url + "\n")
            restored = await restore_queued(services, queued_messages_file())
            if restored:
                log.info("%d task message(s) queued when serve last stopped are queued again", restored)
            if self.settings.embedded_workers:
                await self.start_pool_workers()
        try:
            yield
        finally:
            await self.close()
            if embedded:
                state_file.unlink(missing_ok=True)
