"""Celery's own worker events (``worker-online``, ``worker-heartbeat``, ``worker-offline``), heard
by one thread of the API process while somebody asks which processes are up.

Pool workers send them only with ``WA_TASK_EVENTS`` on (otherwise they run without heartbeats:
nothing would consume them). They tell at once what an inspection cannot: a worker that shut
down said so (``worker-offline``), and a worker too busy to answer a ping within a second still
beats every two seconds. Pub/sub keeps nothing, so the thread starts on demand and ends once
nobody has asked for :data:`IDLE_SECONDS`.

The thread holds one subscription for as long as it listens: a receiver asked again and again for
"events within a second" opens a new connection and subscription each time, and an event published
between two of them (a ``worker-offline`` at shutdown) is never heard.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from celery import Celery
from celery.events import EventReceiver

logger = logging.getLogger(__name__)

IDLE_SECONDS: Final = 60.0
# How long one wait for an event lasts before the thread checks whether it is still wanted, and
# how long it waits before it subscribes again after the broker failed.
WAKE_SECONDS: Final = 1.0
# Connection attempts of one subscription before the thread gives up and checks whether it is still
# wanted (kombu would retry forever otherwise).
CONNECT_ATTEMPTS: Final = 3
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

    def stop(self, timeout: float | None = None) -> None:
        """Stop listening now (instead of :data:`IDLE_SECONDS` after the last question)."""
        with self._lock:
            self._wanted_until = 0.0
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _listen(self) -> None:
        handlers = {kind: self._record for kind in ("worker-online", "worker-heartbeat", "worker-offline")}
        while self._wanted():
            try:
                with self._app.connection_for_read() as connection:
                    receiver = _ReceiverWhile(self._wanted, connection, handlers=handlers, app=self._app)
                    for _ in receiver.consume(safety_interval=WAKE_SECONDS, wakeup=False):
                        pass
            except Exception as exc:
                logger.info("worker events not heard: %s", exc)
                time.sleep(WAKE_SECONDS)


class _ReceiverWhile(EventReceiver):  # type: ignore[misc]
    """Celery's event receiver, consuming on one subscription until ``wanted`` says no more.

    kombu's consumer loop waits at most ``safety_interval`` per turn and calls ``on_iteration``
    before each; ``should_stop`` ends the loop (all three are kombu's ``ConsumerMixin``'s).
    """

    connect_max_retries = CONNECT_ATTEMPTS

    def __init__(self, wanted: Callable[[], bool], connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._still_wanted = wanted

    def on_iteration(self) -> None:
        self.should_stop = not self._still_wanted()
