"""What the benchmarks share: services, processes, statistics, tables and machine facts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.integration.harness import Proc as HarnessProc
from tests.integration.harness import descendants

ROOT = Path(__file__).resolve().parent.parent
PG_HOST = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("BENCH_PG_PORT", "5432"))
PG_USER = os.environ.get("BENCH_PG_USER", "postgres")
REDIS_HOST = os.environ.get("BENCH_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("BENCH_REDIS_PORT", "6379"))
# The one Redis database number the benchmarks own; nothing else is ever flushed.
REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "12"))
DB_PREFIX = "wa_bench_"
OPERATOR_SCOPES = "worker_automation:read,worker_automation:write"
LOG_DIR = Path(os.environ.get("BENCH_LOG_DIR", "/tmp/wa_bench_logs"))


def pg_url(database: str) -> str:
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


def sa_url(database: str) -> str:
    """The SQLAlchemy (asyncpg driver) URL of ``database``."""
    return f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


def redis_url(db: int = REDIS_DB) -> str:
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def check_bench_name(database: str) -> str:
    """Benchmarks only ever create or drop databases of their own."""
    if not database.startswith(DB_PREFIX):
        raise SystemExit(f"database name must start with {DB_PREFIX!r} (got {database!r})")
    return database


async def recreate_database(database: str) -> None:
    """Drop (if present) and create ``database``; it must carry the benchmark prefix."""
    check_bench_name(database)
    conn = await asyncpg.connect(pg_url("postgres"))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{database}"')
    finally:
        await conn.close()


async def database_exists(database: str) -> bool:
    conn = await asyncpg.connect(pg_url("postgres"))
    try:
        return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database))
    finally:
        await conn.close()


def flush_bench_redis() -> None:
    """FLUSHDB of the benchmarks' own Redis database only."""
    import redis

    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
    try:
        client.flushdb()
    finally:
        client.close()


# ---------------------------------------------------------------- statistics and tables


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(value: float | int | str | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # nan
        return "-"
    return f"{value:,.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table (markdown-compatible) with right-aligned figures."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "| " + " | ".join(parts) + " |"

    out = [line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


# ---------------------------------------------------------------- machine facts and load


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wait_for_quiet(threshold: float = 1.5, timeout: float = 600.0, interval: float = 30.0) -> float:
    """Wait (bounded) until the 1-minute load average drops below ``threshold``; returns it."""
    deadline = time.monotonic() + timeout
    load = loadavg()
    while load >= threshold and time.monotonic() < deadline:
        print(f"load average {load:.2f} >= {threshold}: waiting {interval:.0f}s", flush=True)
        time.sleep(interval)
        load = loadavg()
    print(f"load average {load:.2f} at start", flush=True)
    return load


def machine_facts() -> dict[str, str]:
    """Cores, memory, git commit and date, for the results file."""
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = "?"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 1024 / 1024:.0f} GiB",
        "commit": commit or "?",
        "load": f"{loadavg():.2f}",
    }


def print_facts() -> None:
    facts = machine_facts()
    print(", ".join(f"{k}: {v}" for k, v in facts.items()), flush=True)


def rss_mb(pid: int, *, with_children: bool = False) -> float:
    """Resident memory of ``pid`` (and optionally its descendants) in MiB, from /proc."""
    pids = [pid, *(descendants(pid) if with_children else [])]
    total_kb = 0
    for one in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return total_kb / 1024


def _stat_of(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); [] once gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return raw[raw.rindex(")") + 2 :].split()


def _ticks(pid: int, at: int) -> int:
    fields = _stat_of(pid)
    return int(fields[at]) + int(fields[at + 1]) if fields else 0


def cpu_seconds(pid: int, *, with_children: bool = False) -> float:
    """User+system CPU seconds consumed so far by ``pid`` (and its live descendants)."""
    pids = [pid, *(descendants(pid) if with_children else [])]
    return sum(_ticks(one, 11) for one in pids) / os.sysconf("SC_CLK_TCK")


def server_cpu_seconds(pid: int) -> float:
    """User+system CPU seconds of a forking server so far: ``pid`` itself, its live descendants,
    and the children it has already reaped (PostgreSQL's ended backends count there)."""
    return cpu_seconds(pid, with_children=True) + _ticks(pid, 13) / os.sysconf("SC_CLK_TCK")


def postmaster_of(database: str) -> int:
    """The process id of the PostgreSQL server holding ``database`` (the parent of a backend)."""

    async def parent() -> int:
        conn = await pg_connect(database)
        try:  # read while the backend lives
            return int(_stat_of(int(await conn.fetchval("SELECT pg_backend_pid()")))[1])
        finally:
            await conn.close()

    return asyncio.run(parent())


def machine_busy_seconds() -> float:
    """CPU seconds every core of this machine has spent busy so far (``/proc/stat``: user, nice,
    system, irq and softirq; idle, I/O wait and time stolen by other guests left out). Taken
    around a run, it shows what the run cost the whole machine: PostgreSQL and Redis included."""
    with contextlib.suppress(OSError):
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[1:8])
        return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
    return 0.0


# ---------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli() -> list[str]:
    script = Path(sys.executable).with_name("worker-automation")
    return [str(script)] if script.exists() else [sys.executable, "-m", "worker_automation.cli"]


def bench_env(**values: str) -> dict[str, str]:
    """This environment without any ``WA_*`` variable, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
    env.update(values)
    return env


def run_cli(args: Sequence[str], env: Mapping[str, str]) -> str:
    """Run a ``worker-automation`` command; its last stdout line (keys and ids are printed there)."""
    done = subprocess.run(
        [*cli(), *args], env=dict(env), cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"worker-automation {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def stop_cleanly_on_sigterm() -> None:
    """A SIGTERM (``kill``, ``timeout``) ends the benchmark as Ctrl-C would: its ``finally``
    blocks run, so the servers and processes it started are stopped rather than left behind."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


class Proc(HarnessProc):
    """A process started by a benchmark in its own session; stopped by its own id only."""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to the process group it leads, then SIGKILL what is left of it."""
        if not self.alive():
            return
        below = descendants(self.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        if self.wait(timeout) is None:
            self.kill()
        for pid in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Procs:
    """Every process one benchmark run started; :meth:`close` stops them all."""

    tag: str
    procs: list[Proc] = field(default_factory=list)

    def start(self, name: str, args: Sequence[str], env: Mapping[str, str], cwd: Path = ROOT) -> Proc:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log_path = LOG_DIR / f"{self.tag}-{len(self.procs):02d}-{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                list(args),
                env=dict(env),
                cwd=str(cwd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


def wait_http(url: str, proc: Proc | None = None, timeout: float = 60.0) -> None:
    """Wait until ``url`` answers 200 (fails early when ``proc`` exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise SystemExit(f"{proc.name} exited:\n{proc.output()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer in {timeout:.0f}s")


def wait_output(proc: Proc, text: str, timeout: float = 60.0, count: int = 1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.output().count(text) >= count:
            return
        if not proc.alive():
            raise SystemExit(f"{proc.name} exited:\n{proc.output()[-4000:]}")
        time.sleep(0.2)
    raise SystemExit(f"{proc.name}: {text!r} not seen in {timeout:.0f}s:\n{proc.output()[-4000:]}")


@dataclass
class Api:
    """A ``worker-automation serve`` in distributed mode and the keys to talk to it."""

    proc: Proc
    url: str
    env: dict[str, str]

    def operator_key(self, name: str = "bench") -> str:
        return run_cli(
            ["keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES, "--name", name],
            self.env,
        )

    def machine_key(self, name: str, *, queue: str | None = None, automation: str | None = None) -> str:
        target = ["--queue", queue] if queue else ["--automation", str(automation)]
        return run_cli(["machines", "register", "--name", name, *target], self.env)


def service_env(database: str, *, prefix: str = "wa_bench") -> dict[str, str]:
    return bench_env(
        WA_DATABASE_URL=pg_url(database),
        WA_REDIS_URL=redis_url(),
        WA_REDIS_PREFIX=prefix,
    )


def start_api(
    procs: Procs,
    database: str,
    *,
    port: int | None = None,
    log_level: str = "warning",
    source: Path | None = None,
    name: str = "serve",
    workers: int = 1,
    extra_env: Mapping[str, str] | None = None,
) -> Api:
    """``serve`` against ``database`` and the benchmarks' Redis; waits for /readyz.

    ``source`` is a directory holding another copy of the ``worker_automation`` package (say, the
    code before a change) that this server runs instead of the installed one.
    """
    port = port or free_port()
    env = service_env(database)
    env.update(extra_env or {})
    url = f"http://127.0.0.1:{port}"
    env["WA_API_URL"] = url
    if source is not None:
        env["PYTHONPATH"] = str(source)
    command = [*cli(), "serve", "--port", str(port), "--log-level", log_level]
    if workers > 1:
        command += ["--workers", str(workers)]
    proc = procs.start(name, command, env)
    wait_http(f"{url}/readyz", proc, timeout=120)
    return Api(proc, url, env)


def start_pool_worker(
    procs: Procs, api: Api, machine_key: str, *, queue: str = "scan", concurrency: int = 2, name: str = "pool"
) -> Proc:
    env = dict(api.env)
    env["WA_WORKER_API_KEY"] = machine_key
    node = f"{name}-{os.getpid()}@bench"
    proc = procs.start(name, [*cli(), "worker", "-Q", queue, "-c", str(concurrency), "-n", node], env)
    wait_output(proc, "ready.", timeout=90)
    return proc


async def pg_connect(database: str) -> asyncpg.Connection:
    return await asyncpg.connect(pg_url(database))


def run(coro: Any) -> Any:
    return asyncio.run(coro)
