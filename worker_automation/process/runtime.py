"""The API process's run-time: starts services (and, embedded, the pool workers) once, and says
when the whole of it is ready: with an embedded pool, not before every pool worker answers."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from worker_automation.infra.cancelling import cancel_and_wait
from worker_automation.infra.memory import MemoryReleaser
from worker_automation.process.embedded_state import DirectoryLock, broker_state_file
from worker_automation.process.housekeeping import Housekeeper
from worker_automation.resolvers.automations import ensure_settings_rows
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

log = logging.getLogger(__name__)
GC_THRESHOLDS = (50_000, 20, 100)


class Runtime:
    """Holds the process's :class:`Services`; started by the app's lifespan (or on first use)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._services: Services | None = None
        self._lock = asyncio.Lock()
        self._pool: Any = None
        self._housekeeper: Housekeeper | None = None
        self._directory_lock: DirectoryLock | None = None
        self._ready = asyncio.Event()
        self._waiting_for_pool: asyncio.Task[None] | None = None
        self._on_stop: list[Callable[[], Awaitable[None]]] = []
        # The process's: the transports note their large answers here before services exist.
        self.memory = MemoryReleaser(first=self._refresh_idle_connections)

    def on_stop(self, stop: Callable[[], Awaitable[None]]) -> None:
        """Run ``stop`` first when the app stops, while the services are still open: for work of
        the transports that may hold a database connection."""
        self._on_stop.append(stop)

    def hold(self, lock: DirectoryLock) -> None:
        """Keep the embedded serve's directory lock until the app stops (given up then, since
        uvicorn ends the process on SIGTERM before its caller's cleanup could run)."""
        self._directory_lock = lock

    @property
    def pool_ready(self) -> bool | None:
        """Whether every embedded pool worker has answered; None when there is no such pool."""
        if self._pool is None:
            return None
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        """Return once started (the lifespan has run), the embedded pool workers answering."""
        await self._ready.wait()

    async def _pool_ready(self) -> None:
        await self._pool.wait_ready()
        self._ready.set()

    async def services(self) -> Services:
        if self._services is None:
            async with self._lock:
                if self._services is None:
                    self._services = await self._start()
        return self._services

    async def _refresh_idle_connections(self) -> None:
        if self._services is not None:
            await self._services.db.refresh_idle_connections()

    async def _start(self) -> Services:
        services = await Services.start(self.settings, memory=self.memory)
        await ensure_settings_rows(services.db)
        return services

    async def start_pool_workers(self) -> None:
        """Embedded mode: Celery pool workers for every queue, as separate processes."""
        from worker_automation.process.embedded_pool import EmbeddedPool

        services = await self.services()
        self._pool = EmbeddedPool(services)
        await self._pool.start()

    async def recover_embedded(self) -> None:
        """An embedded broker starts empty: every queued job is sent again, and the runs the
        previous ``serve``'s pool workers held (they died with it) are ended or queued again."""
        from worker_automation.process.embedded_pool import embedded_machine_ids
        from worker_automation.resolvers.recovery import recover_after_restart

        services = await self.services()
        await recover_after_restart(services, await embedded_machine_ids(services))

    async def drain(self) -> None:
        """Before the API stops listening: stop the periodic work, then the embedded pool
        workers, so the jobs they are running can still report how they ended (finished, or
        failed at the end of the grace). Jobs still queued in the embedded broker are sent
        again by the next start (the database row is the truth)."""
        for stop in self._on_stop:
            await stop()
        await cancel_and_wait(self._waiting_for_pool)
        self._waiting_for_pool = None
        if self._housekeeper is not None:
            await self._housekeeper.stop()
            self._housekeeper = None
        if self._pool is not None:
            await self._pool.stop()
            self._pool = None

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
            await self.recover_embedded()
            if self.settings.embedded_workers:
                await self.start_pool_workers()
        self._housekeeper = Housekeeper(await self.services())
        self._housekeeper.start()
        if self._pool is not None:
            self._waiting_for_pool = asyncio.create_task(self._pool_ready(), name="pool-ready")
        else:
            self._ready.set()
        try:
            yield
        finally:
            await self.close()
            if embedded:
                state_file.unlink(missing_ok=True)
            if self._directory_lock is not None:
                self._directory_lock.release()
