"""What ``overrides.quiet_redis_server`` relies on in fakeredis: its request handler's hooks and
the client and socket it reaches through them, the event a fake socket sets when it queues a reply,
and the server's shutdown event. A release that renames or drops one fails here first; one that
drops the reply event would leave idle connections polling, which the last test catches."""

from __future__ import annotations

import inspect
import threading
import time

import redis
from fakeredis import TcpFakeServer
from fakeredis._clients._tcp_server import TCPFakeRequestHandler
from fakeredis._typing import RaiseErrorTypes

from worker_automation.broker.embedded import EmbeddedRedis


def test_the_request_handler_hooks_and_what_they_reach() -> None:
    for hook in ("setup", "handle", "finish"):
        assert callable(getattr(TCPFakeRequestHandler, hook))
    source = inspect.getsource(TCPFakeRequestHandler)
    for name in ("current_client", "writer", "get_socket"):
        assert name in source, f"the handler no longer sets up {name}"
    # Caught as the error replies a command raises.
    assert all(issubclass(kind, BaseException) for kind in RaiseErrorTypes)


def test_the_server_has_its_shutdown_event() -> None:
    server = TcpFakeServer(("127.0.0.1", 0))
    try:
        assert isinstance(server._shutdown_event, threading.Event)
    finally:
        server.server_close()


def test_a_published_message_wakes_a_sleeping_subscriber_and_idle_costs_nothing() -> None:
    with EmbeddedRedis() as embedded:
        client = redis.Redis.from_url(embedded.url)
        listener = redis.Redis.from_url(embedded.url).pubsub()
        listener.subscribe("contract")
        subscribed = listener.get_message(timeout=2)
        assert subscribed is not None and subscribed["type"] == "subscribe"
        # The reply event is what wakes a connection: without it, the server polls every 10 ms.
        time.sleep(0.3)
        before = embedded.wakeups()
        time.sleep(0.5)
        assert embedded.wakeups() - before <= 2
        started = time.monotonic()
        client.publish("contract", b"hello")
        message = listener.get_message(timeout=2)
        assert message is not None and message["data"] == b"hello"
        assert time.monotonic() - started < 0.5
        # A blocking pop is answered by the push of another connection.
        popped: list[object] = []
        waiter = threading.Thread(target=lambda: popped.append(client.brpop(["contract-list"], timeout=5)))
        waiter.start()
        time.sleep(0.2)
        redis.Redis.from_url(embedded.url).lpush("contract-list", b"job")
        waiter.join(timeout=5)
        assert popped == [(b"contract-list", b"job")]
        listener.close()
        client.close()
