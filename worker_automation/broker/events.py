"""The event bus: job events over Redis pub/sub, one subscription per process, fanned out in memory.

Every API replica and worker publishes on one channel; each process holds a single subscription
and hands every event to its local listeners through bounded queues. A listener that cannot keep
up is dropped rather than allowed to slow the others down or grow without bound. Pub/sub keeps
nothing for absent subscribers, so after an outage every listener receives a ``resync`` event
telling it to re-read the current state instead of trusting what it has.

A second channel on the same subscription carries :class:`AccessChange` notices: a key revoked or
lowered, a machine turned off or given a new key. Each process checks the websockets it holds for
that key again at once (a lost notice is caught by the periodic check the holder runs anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final

import redis.exceptions
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from worker_automation.broker.access_changes import AccessChange, AccessWatcher
from worker_automation.domain.errors import Unavailable
from worker_automation.domain.vocabulary import EventKind, QueueChange
from worker_automation.infra.cancelling import cancel_and_wait

logger = logging.getLogger(__name__)

UNAVAILABLE_MESSAGE: Final = "Barramento de eventos indisponivel"
DEFAULT_LISTENER_QUEUE: Final = 256

CONNECT_TIMEOUT_SECONDS: Final = 1.0
SOCKET_TIMEOUT_SECONDS: Final = 2.0
# How long one read waits: bounds how late the reader notices stop() or a silent connection.
POLL_SECONDS: Final = 1.0
# A connection can die without a reset (a partition, a dropped NAT entry): after this much silence
# the reader pings, and with no answer at all for SILENCE_LIMIT_SECONDS it reconnects.
KEEPALIVE_SECONDS: Final = 5.0
SILENCE_LIMIT_SECONDS: Final = 15.0
FIRST_BACKOFF_SECONDS: Final = 0.05
MAX_BACKOFF_SECONDS: Final = 1.0

CONNECTION_ERRORS: Final = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Event:
    """One job event: its kind and the job row as a JSON-ready dict; or a queue's change, with
    ``{"queue": name}`` for the row."""

    kind: EventKind | QueueChange
    job: dict[str, Any]
    at: str = field(default_factory=_now_iso)
    id: str = field(default_factory=_new_id)

    def to_json(self) -> str:
        # Rows sometimes still carry datetimes or decimals: an event is better late-stringified
        # than lost after the change it reports has been committed.
        return json.dumps(
            {"kind": self.kind.value, "worker": self.job, "at": self.at, "id": self.id},
            default=str,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> Event:
        """Parse :meth:`to_json` output; ValueError for anything else."""
        data = json.loads(raw)
        if not isinstance(data, dict) or not isinstance(data.get("worker"), dict):
            raise ValueError("not an event")
        try:
            return cls(kind=_kind(data["kind"]), job=data["worker"], at=str(data["at"]), id=str(data["id"]))
        except KeyError as exc:
            raise ValueError(f"event without {exc}") from exc


def _kind(value: Any) -> EventKind | QueueChange:
    """The kind named ``value``; ValueError when there is none."""
    try:
        return EventKind(value)
    except ValueError:
        return QueueChange(value)


class _EndOfStream:
    """Marks the end of a listener's queue."""


_END: Final = _EndOfStream()


class Listener:
    """One local consumer of the bus: an async iterator of events, closed by :meth:`close`.

    Use as ``async with bus.listen() as listener: async for event in listener: ...``. Events come
    in publication order. When its queue is full the bus drops it: :attr:`dropped` turns True and
    the iteration ends after the events already queued.
    """

    def __init__(self, bus: EventBus, maxsize: int) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event | _EndOfStream] = asyncio.Queue(maxsize=maxsize + 1)
        self._maxsize = maxsize
        self.dropped = False
        self.closed = False

    def _offer(self, event: Event) -> bool:
        # One slot is kept for the end marker, so closing never needs to wait for the reader.
        if self.closed:
            return True
        if self._queue.qsize() >= self._maxsize:
            return False
        self._queue.put_nowait(event)
        return True

    def _drop(self) -> None:
        self.dropped = True
        self.close()

    def close(self) -> None:
        """Stop receiving; the iteration ends once the events already queued are read."""
        if self.closed:
            return
        self.closed = True
        self._bus._forget(self)
        self._queue.put_nowait(_END)

    @property
    def pending(self) -> int:
        """Events queued and not yet read."""
        return self._queue.qsize() - (1 if self.closed else 0)

    def __aiter__(self) -> Listener:
        return self

    async def __anext__(self) -> Event:
        item = await self._queue.get()
        if isinstance(item, _EndOfStream):
            # Leave the marker for anyone else iterating the same listener.
            self._queue.put_nowait(item)
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> Listener:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class EventBus:
    """Publishes events and keeps this process's one subscription to them (see module doc)."""

    def __init__(self, redis_url: str, channel_prefix: str) -> None:
        self.channel = f"{channel_prefix}:events"
        self.access_channel = f"{channel_prefix}:access"
        self.redis_url = redis_url
        # Publishing: one immediate retry reconnects a pooled connection Redis dropped, and a down
        # Redis fails fast. The client name makes this bus's connections easy to find in CLIENT LIST.
        self._redis: Redis = self._client(redis_url, retries=1)
        # Subscribing: no retry at all. redis-py would otherwise reconnect and resubscribe behind
        # the reader's back, and the events lost in between would go unnoticed (no resync).
        self._subscriber: Redis = self._client(redis_url, retries=0)
        self._listeners: set[Listener] = set()
        self._access_watchers: list[AccessWatcher] = []
        self._reader: asyncio.Task[None] | None = None
        self._live = asyncio.Event()
        self.reconnects = 0

    def _client(self, redis_url: str, *, retries: int) -> Redis:
        return Redis.from_url(
            redis_url,
            client_name=self.channel,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), retries),
        )

    # -- publishing -------------------------------------------------------------------------

    async def publish(self, event: Event) -> int:
        """Send ``event`` to every subscribed process; :class:`Unavailable` when Redis is down.
        The characters sent."""
        self._check_publishable(event)
        message = event.to_json()
        try:
            await self._redis.publish(self.channel, message)
        except CONNECTION_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc
        return len(message)

    async def publish_many(self, events: Iterable[Event]) -> int:
        """Send several events in one round trip, in order; the characters sent."""
        batch = list(events)
        if not batch:
            return 0
        for event in batch:
            self._check_publishable(event)
        sent = 0
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for event in batch:
                    message = event.to_json()
                    sent += len(message)
                    pipe.publish(self.channel, message)
                await pipe.execute()
        except CONNECTION_ERRORS as exc:
            raise Unavailable(UNAVAILABLE_MESSAGE) from exc
        return sent

    def encoded(self, events: Iterable[Event]) -> list[tuple[str, str]]:
        """The ``PUBLISH`` arguments (channel, message) of ``events``, for a caller that sends them
        in a pipeline of its own on the same Redis (:attr:`redis_url`), in order."""
        batch = list(events)
        for event in batch:
            self._check_publishable(event)
        return [(self.channel, event.to_json()) for event in batch]

    async def announce_access(self, change: AccessChange) -> None:
        """Tell every process that ``change`` happened (it is committed already). Never raises:
        with Redis down the holders' periodic check finds the change a few seconds later."""
        try:
            await self._redis.publish(self.access_channel, change.to_json())
        except CONNECTION_ERRORS as exc:
            logger.warning("access change not announced (%s); it is found by the periodic check", exc)

    @staticmethod
    def _check_publishable(event: Event) -> None:
        if event.kind is EventKind.RESYNC:
            raise ValueError("resync events are made by each subscriber, never published")

    # -- subscribing ------------------------------------------------------------------------

    def listen(self, maxsize: int = DEFAULT_LISTENER_QUEUE) -> Listener:
        """A new local listener; starts the process's subscription if it is not running yet."""
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        listener = Listener(self, maxsize)
        self._listeners.add(listener)
        self._ensure_reader()
        return listener

    def watch_access(self, watcher: AccessWatcher) -> None:
        """Call ``watcher`` with every access change heard from now on (see :class:`AccessChange`)."""
        self._access_watchers.append(watcher)
        self._ensure_reader()

    @property
    def listener_count(self) -> int:
        """Listeners currently attached."""
        return len(self._listeners)

    @property
    def is_live(self) -> bool:
        """True while the subscription is established."""
        return self._live.is_set()

    async def start(self) -> None:
        """Start the subscription now instead of with the first listener."""
        self._ensure_reader()

    async def ready(self) -> None:
        """Wait until the subscription is live (events published from now on are delivered)."""
        self._ensure_reader()
        await self._live.wait()

    async def stop(self) -> None:
        """End the subscription, close every listener and release the connections."""
        reader, self._reader = self._reader, None
        await cancel_and_wait(reader)
        for listener in list(self._listeners):
            listener.close()
        self._live.clear()
        await self._subscriber.aclose()
        await self._redis.aclose()

    def _forget(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def _ensure_reader(self) -> None:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read_forever(), name=self.channel)

    def _fan_out(self, event: Event) -> None:
        for listener in list(self._listeners):
            if not listener._offer(event):
                logger.warning("event listener dropped: %d events behind", listener.pending)
                listener._drop()

    async def _read_forever(self) -> None:
        backoff = FIRST_BACKOFF_SECONDS
        outage = False
        while True:
            pubsub = self._subscriber.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel, self.access_channel)
                self._live.set()
                if outage:
                    self.reconnects += 1
                    logger.info("event subscription restored on %s", self.channel)
                    self._fan_out(Event(kind=EventKind.RESYNC, job={}))
                    self._tell_access(None)
                outage = False
                backoff = FIRST_BACKOFF_SECONDS
                await self._pump(pubsub)
            except CONNECTION_ERRORS as exc:
                if not outage:
                    logger.warning("event subscription lost on %s: %s", self.channel, exc)
                outage = True
            except Exception:
                # A bug here must not silence the bus for the life of the process.
                logger.exception("event reader failed on %s; restarting it", self.channel)
                outage = True
            finally:
                self._live.clear()
                await self._discard(pubsub)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _pump(self, pubsub: PubSub) -> None:
        loop = asyncio.get_running_loop()
        last_heard = last_ping = loop.time()
        while True:
            message = await pubsub.get_message(timeout=POLL_SECONDS)
            now = loop.time()
            if message is None:
                if now - last_heard > SILENCE_LIMIT_SECONDS:
                    raise redis.exceptions.ConnectionError("no reply from Redis on the event subscription")
                if now - last_heard > KEEPALIVE_SECONDS and now - last_ping > KEEPALIVE_SECONDS:
                    await pubsub.ping()
                    last_ping = now
                continue
            last_heard = now
            if message.get("type") != "message":
                continue
            if message.get("channel") in (self.access_channel, self.access_channel.encode()):
                self._heard_access(message["data"])
                continue
            if not self._listeners:
                continue
            try:
                event = Event.from_json(message["data"])
            except ValueError:
                logger.warning("ignoring a malformed message on %s", self.channel)
                continue
            self._fan_out(event)

    def _heard_access(self, raw: str | bytes) -> None:
        try:
            change = AccessChange.from_json(raw)
        except ValueError:
            logger.warning("ignoring a malformed message on %s", self.access_channel)
            return
        self._tell_access(change)

    def _tell_access(self, change: AccessChange | None) -> None:
        for watcher in list(self._access_watchers):
            watcher(change)

    @staticmethod
    async def _discard(pubsub: PubSub) -> None:
        # The connection may already be broken; closing is best effort.
        # redis-py types aclose from 8.2 on; reading it through a typed name works either way.
        close: Callable[[], Awaitable[None]] = pubsub.aclose
        with contextlib.suppress(Exception):
            await close()


@asynccontextmanager
async def publishing_bus(redis_url: str | None, channel_prefix: str) -> AsyncIterator[EventBus | None]:
    """A bus a command publishes on and closes at the end; None when there is no broker to reach."""
    if redis_url is None:
        yield None
        return
    bus = EventBus(redis_url, channel_prefix)
    try:
        yield bus
    finally:
        await bus.stop()
