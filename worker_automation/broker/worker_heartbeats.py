"""Celery's own worker events (``worker-online``, ``worker-heartbeat``, ``worker-offline``), heard
by one thread of the API process while somebody asks which processes are up.

Pool workers send them only with ``WA_TASK_EVENTS`` on (otherwise they run without heartbeats:
nothing would consume them). They tell at once what an inspection cannot: a worker that shut
down said so (``worker-offline``), and a worker too busy to answer a ping within a second still
beats every two seconds. Pub/sub keeps nothing, so the thread starts on demand and ends once
nobody has asked for :data:`IDLE_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from celery import Celery

logger = logging.getLogger(__name__)

IDLE_SECONDS: Final = 60.0
# How long one wait for an event lasts before the thread checks whether it is still wanted.
WAKE_SECONDS: Final = 1.0
# A worker whose last heartbeat is older than this is not taken as beating.
BEATING_SECONDS: Final = 10.0


@dataclass(frozen=True)
class Heard:
    """The last worker event of one worker."""

    at: datetime
    offline: bool


class WorkerHeartbeats:
    """The last event of each worker, kept by a receiver thread while wanted."""

    def __init__(self, app: Celery) -> None:
        self._app = app
        self._heard: dict[str, Heard] = {}
        self._lock = threading.Lock()
        self._wanted_until = 0.0
        self._thread: threading.Thread | None = None

    def heard(self) -> dict[str, Heard]:
        """Each worker's last event; starts listening (for :data:`IDLE_SECONDS` from now)."""
        with self._lock:
            self._wanted_until = time.monotonic() + IDLE_SECONDS
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._listen, name="worker-events", daemon=True)
                self._thread.start()
            return dict(self._heard)

    def _record(self, event: dict[str, Any]) -> None:
        host = event.get("hostname")
        if isinstance(host, str):
            with self._lock:
                self._heard[host] = Heard(datetime.now(UTC), event.get("type") == "worker-offline")

    def _wanted(self) -> bool:
        with self._lock:
            return time.monotonic() < self._wanted_until

    def _listen(self) -> None:
        handlers = {kind: self._record for kind in ("worker-online", "worker-heartbeat", "worker-offline")}
        while self._wanted():
            try:
                with self._app.connection_for_read() as connection:
                    receiver = self._app.events.Receiver(connection, handlers=handlers)
                    while self._wanted():
                        try:
                            receiver.capture(limit=None, timeout=WAKE_SECONDS, wakeup=False)
                        except TimeoutError:
                            continue
            except Exception as exc:
                logger.info("worker events not heard: %s", exc)
                time.sleep(WAKE_SECONDS)
