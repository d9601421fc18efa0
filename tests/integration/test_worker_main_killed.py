"""Where the task messages of a Celery worker killed outright go, with this project's settings
(late acks, no reject on a lost worker, the two-hour visibility timeout), on a Redis server of
the test's own: they stay in Redis's ``unacked`` hash, in no queue, and no other worker gets them
before the visibility timeout; the pool process dies with its worker."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.celery_probe_tasks import BROKER_ENV, PROJECT_ROOT
from tests.integration.harness import descendants, free_port, is_running, wait_until
from worker_automation.broker.celery_app import make_celery
from worker_automation.settings import Settings

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server to start its own"),
]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[str]:
    """A Redis server of this test's own (no persistence), stopped afterwards."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        wait_until(lambda: _pings(client), 10.0, "redis-server did not start")
        yield url
    finally:
        client.close()
        server.terminate()
        server.wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def _worker(url: str, name: str, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "celery", "-A", "tests.integration.celery_probe_tasks", "worker"]
    command += ["-Q", "scan", "-P", "prefork", "-c", "1", "--without-mingle", "--without-gossip"]
    command += ["-n", name, "-l", "info"]
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            cwd=PROJECT_ROOT,
            env=dict(os.environ, **{BROKER_ENV: url}),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_a_killed_workers_message_stays_unacked_out_of_every_queue(own_redis: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(own_redis)
    app = make_celery(Settings(), own_redis, name="probe")
    first = _worker(own_redis, "first@test", tmp_path / "first.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        wait_until(lambda: b" ready." in (tmp_path / "first.log").read_bytes(), 30.0, "worker not ready")
        task = app.send_task("probe.sleep", args=[60], queue="scan")
        wait_until(lambda: client.hlen("unacked") == 1, 20.0, "the task was never received")
        children = descendants(first.pid)
        assert children
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        wait_until(lambda: not [p for p in children if is_running(p)], 5.0, "the pool process outlived it")

        second = _worker(own_redis, "second@test", tmp_path / "second.log")
        wait_until(lambda: b" ready." in (tmp_path / "second.log").read_bytes(), 30.0, "worker not ready")
        time.sleep(3.0)  # a few of the new worker's polling rounds
        assert client.hlen("unacked") == 1 and client.zcard("unacked_index") == 1
        assert client.llen("scan") == 0
        assert task.id.encode() not in (tmp_path / "second.log").read_bytes()
        second.send_signal(signal.SIGTERM)  # a warm shutdown restores only its own messages
        second.wait(20)
        assert client.hlen("unacked") == 1 and client.llen("scan") == 0
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        app.close()
        client.close()
