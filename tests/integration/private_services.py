"""A Redis server and a PostgreSQL cluster of a test's own, on free ports, that it may stop.

Fault tests stop, kill and restart services; the machine's shared PostgreSQL and Redis must never
be touched, so these start private instances: ``redis-server`` without persistence (a restart
loses every key, as a Redis without AOF or RDB does) and a throwaway PostgreSQL cluster made by
``initdb`` with durability turned off (nothing here needs to survive a power cut, and ``fsync``
would make every start and stop slower on a shared disk). PostgreSQL refuses to run as root: when
the tests run as root, its commands run as the ``postgres`` OS user in a directory it owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg

from tests.integration.harness import free_port

START_TIMEOUT = 30.0
PG_OS_USER = "postgres"


def _wait_port(port: int, up: bool, timeout: float) -> None:
    """Until something listens on ``port`` (``up``) or nothing does."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                listening = True
        except OSError:
            listening = False
        if listening == up:
            return
        if time.monotonic() >= deadline:
            state = "listening" if up else "closed"
            raise AssertionError(f"port {port} not {state} after {timeout}s")
        time.sleep(0.05)


def binary(name: str) -> str | None:
    """Where ``name`` is: the PATH, or PostgreSQL's versioned directory (newest first)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def missing_binaries() -> list[str]:
    """The server programs these fixtures need and cannot find."""
    return [name for name in ("redis-server", "initdb", "pg_ctl") if binary(name) is None]


class PrivateRedis:
    """``redis-server`` on a free port with no persistence: :meth:`restart` empties it."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.log_path = directory / "redis.log"
        self._popen: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def start(self) -> PrivateRedis:
        if self.running:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        server = binary("redis-server")
        assert server, "redis-server is not installed"
        args = [
            server,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--daemonize", "no",
            "--logfile", str(self.log_path),
        ]  # fmt: skip
        self._popen = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        _wait_port(self.port, True, START_TIMEOUT)
        return self

    def stop(self) -> None:
        """Kill the server (no save: there is nothing to save); the port is free afterwards."""
        if self._popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._popen.send_signal(signal.SIGKILL)
        self._popen.wait(10)
        self._popen = None
        _wait_port(self.port, False, START_TIMEOUT)

    def restart(self) -> None:
        """Stop and start again on the same port: every queued message and result is gone."""
        self.stop()
        self.start()

    def flushall(self) -> None:
        import redis

        client = redis.Redis.from_url(self.url())
        try:
            client.flushall()
        finally:
            client.close()


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary directory, on a free port, trust authentication."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="wa-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log_path = self.root / "postgres.log"
        self._as_root = os.geteuid() == 0
        self._initialised = False

    def _run(self, *args: str, timeout: float = 60.0) -> None:
        command = list(args)
        if self._as_root:
            command = ["runuser", "-u", PG_OS_USER, "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")

    def _init(self) -> None:
        self.sockets.mkdir(parents=True, exist_ok=True)
        self.log_path.touch()
        if self._as_root:
            shutil.chown(self.root, PG_OS_USER, PG_OS_USER)
            for path in (self.sockets, self.log_path):
                shutil.chown(path, PG_OS_USER, PG_OS_USER)
        initdb = binary("initdb")
        assert initdb, "initdb is not installed"
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._initialised = True

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` in this cluster."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def running(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def start(self) -> PrivatePostgres:
        if not self._initialised:
            self._init()
        if self.running:
            return self
        pg_ctl = binary("pg_ctl")
        assert pg_ctl, "pg_ctl is not installed"
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        data, log = str(self.data), str(self.log_path)
        self._run(pg_ctl, "-D", data, "-l", log, "-o", options, "-w", "-t", "30", "start")
        _wait_port(self.port, True, START_TIMEOUT)
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the cluster: ``fast`` ends every connection at once, ``immediate`` is a crash."""
        if not self._initialised or not self.running:
            return
        pg_ctl = binary("pg_ctl")
        assert pg_ctl
        self._run(pg_ctl, "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")
        _wait_port(self.port, False, START_TIMEOUT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_database(self, name: str) -> str:
        """A new empty database; its SQLAlchemy URL."""

        async def create() -> None:
            conn = await asyncpg.connect(self.admin_dsn)
            try:
                await conn.execute(f'CREATE DATABASE "{name}"')
            finally:
                await conn.close()

        asyncio.run(create())
        return self.url(name)

    def destroy(self) -> None:
        """Stop the cluster as a crash would (nothing to keep) and delete its files."""
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def private_redis(directory: Path) -> Iterator[PrivateRedis]:
    """A started :class:`PrivateRedis`, killed at the end whatever happened."""
    server = PrivateRedis(directory).start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started :class:`PrivatePostgres`, stopped and deleted at the end whatever happened."""
    cluster = PrivatePostgres()
    try:
        yield cluster.start()
    finally:
        cluster.destroy()
