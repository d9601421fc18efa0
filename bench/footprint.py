"""What the embedded default costs a machine: ``worker-automation serve`` with no environment,
next to a plain ``celery worker`` on the machine's Redis and, when installed, Flower.

    python -m bench.footprint [--idle-seconds 60] [--jobs 200] [--source DIR]

Each side is started as a user starts it and left alone until its process tree stops growing
(``serve``: once ``/readyz`` answers). Then, per side: the processes of its tree, the PSS of each
(``/proc/PID/smaps_rollup``: shared pages split among the processes sharing them, so the total
is what the tree really costs), CPU of the whole tree (``utime + stime`` from ``/proc/PID/stat``)
as a percentage of one core over ``--idle-seconds`` of idling, then the CPU and wall time of a
burst of ``--jobs`` no-op jobs (``serve``: ``demo.echo`` through ``POST /api/v1/jobs/batch``,
waited for in its SQLite file; Celery: a no-op task, waited for through its results).

``serve``'s pool workers fork their pool processes only while they have jobs, so two more
figures of ``serve``: how long one job takes from its ``POST`` to its end on the idle tree (the
first job after idle pays for starting a pool process), and the tree's processes and PSS
``--after-burst-seconds`` after the burst (the pool processes are gone again once idle).
Last, each side is stopped as its user stops it (``serve`` by Ctrl-C's SIGINT, Celery and
Flower by SIGTERM) and the time to its exit and its exit code are given.

``serve`` runs its broker inside its own process, so its figures include the broker's work; the
plain Celery worker's do not include the machine's ``redis-server`` (shared with everything else
on the machine). Celery uses its own Redis database (``--redis-db``, default 14), flushed before
and after; its pool has as many processes as the embedded pool (``--celery-concurrency``).
Flower (not a dependency: ``--flower-celery`` names a ``celery`` executable whose environment has
it, as ``bench.flower_compare`` runs it) is measured idle only, watching that same database.
``--source DIR`` runs ``serve`` from another copy of the package (say, the code before a change).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from bench.common import (
    ROOT,
    Proc,
    Procs,
    bench_env,
    cli,
    cpu_seconds,
    fmt,
    free_port,
    print_facts,
    stop_cleanly_on_sigterm,
    table,
    wait_http,
    wait_output,
)
from bench.job_feed import dispatch_all
from tests.integration.harness import descendants

OPERATOR_KEY_COMMAND = [
    "keys", "create", "--perfil", "administrador",
    "--scopes", "worker_automation:read,worker_automation:write", "--name", "footprint",
]  # fmt: skip
# The embedded pool's processes: one per configured worker of the five queues.
EMBEDDED_POOL_SIZE = 7
FINISHED = ("CONCLUIDO", "FALHA", "CANCELADO")
# What a process's command line is shortened to: the words after the first of these.
EMBEDDED_WORKERS = "embedded_worker"
EMBEDDED_KINDS = ("", " (forks the workers)", " (worker)", " (pool process)")
PROGRAMS = (
    "worker_automation.cli.embedded_worker ",
    "worker_automation.cli ",
    "worker-automation ",
    "celery ",
)
STARTUP_TIMEOUT = 180.0
# A tree spending more than this (% of one core) is still starting.
SETTLED_CPU_PERCENT = 10.0
BUSY_SETTLE_SECONDS = 30.0
BURST_TIMEOUT = 600.0
STOP_TIMEOUT = 60.0
FLOWER_CELERY = Path("/tmp/flowerenv/bin/celery")


@dataclass
class Side:
    """One column of the comparison."""

    name: str
    processes: list[tuple[int, str, float]] = field(default_factory=list)
    ready_s: float | None = None
    idle_cpu_percent: float | None = None
    burst_cpu_s: float | None = None
    burst_wall_s: float | None = None
    burst_failed: int = 0
    first_job_s: float | None = None
    after_burst: list[tuple[int, str, float]] = field(default_factory=list)
    # From the stop signal a user sends (see time_the_stop) to the exit.
    stop_s: float | None = None
    stop_code: int | None = None
    note: str = ""

    @property
    def pss_total(self) -> float:
        return sum(pss for _pid, _label, pss in self.processes)


def pss_mib(pid: int) -> float:
    """Proportional set size of ``pid`` in MiB (0 once it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def depth_below(pid: int, root: int) -> int:
    """How many parents up ``root`` is from ``pid`` (0: ``pid`` is ``root``)."""
    depth = 0
    while pid != root and pid > 1:
        pid, depth = parent_of(pid), depth + 1
    return depth


def label(pid: int, root: int) -> str:
    """A short name for a process of the tree: its command line after the interpreter."""
    with contextlib.suppress(OSError):
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        text = " ".join(w.decode(errors="replace") for w in words if w)
        for marker in PROGRAMS:
            if marker in text:
                text = text.split(marker, 1)[1]
                break
        depth = depth_below(pid, root)
        if EMBEDDED_WORKERS in text:
            # serve -> the process that forks the workers -> a worker per queue -> pool processes
            return EMBEDDED_WORKERS + EMBEDDED_KINDS[min(depth, len(EMBEDDED_KINDS) - 1)]
        kind = "" if depth <= 1 else " (pool process)"
        return text[:60] + kind
    return "?"


def snapshot(root: int) -> list[tuple[int, str, float]]:
    return [(pid, label(pid, root), pss_mib(pid)) for pid in [root, *descendants(root)]]


def settle(proc: Proc, quiet_s: float = 5.0, timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait until the process tree has kept the same members for ``quiet_s`` while spending
    under :data:`SETTLED_CPU_PERCENT` of a core (started, not merely spawned), or for
    :data:`BUSY_SETTLE_SECONDS` however busy it is (a tree that stays busy when idle)."""
    deadline = time.monotonic() + timeout
    members = set(descendants(proc.pid))
    same_since = calm_since = time.monotonic()
    spent, at = cpu_seconds(proc.pid, with_children=True), time.monotonic()
    while time.monotonic() < deadline:
        if not proc.alive():
            raise SystemExit(f"{proc.name} exited:\n{proc.output()[-4000:]}")
        time.sleep(1.0)
        now = set(descendants(proc.pid))
        cpu, when = cpu_seconds(proc.pid, with_children=True), time.monotonic()
        busy = (cpu - spent) / (when - at) * 100
        spent, at = cpu, when
        if now != members:
            members, same_since, calm_since = now, when, when
        elif busy >= SETTLED_CPU_PERCENT:
            calm_since = when
        if when - calm_since >= quiet_s or when - same_since >= BUSY_SETTLE_SECONDS:
            return
    raise SystemExit(f"{proc.name}: its processes kept changing for {timeout:.0f}s")


def idle_cpu_percent(root: int, seconds: float) -> float:
    start, began = cpu_seconds(root, with_children=True), time.monotonic()
    time.sleep(seconds)
    spent = cpu_seconds(root, with_children=True) - start
    return spent / (time.monotonic() - began) * 100


def time_the_stop(side: Side, proc: Proc, sig: signal.Signals) -> None:
    """Send ``sig`` to the tree's root, as a user stops it, and time its exit."""
    began = time.monotonic()
    proc.send(sig)
    side.stop_code = proc.wait(STOP_TIMEOUT)
    if side.stop_code is not None:
        side.stop_s = time.monotonic() - began


def finished_jobs(database: Path) -> tuple[int, int]:
    """(jobs ended, of which not CONCLUIDO) in an embedded serve's SQLite file."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
    try:
        marks = ",".join("?" * len(FINISHED))
        rows = conn.execute(
            f"SELECT status, count(*) FROM workers WHERE status IN ({marks}) GROUP BY status", FINISHED
        ).fetchall()
    finally:
        conn.close()
    counts = dict(rows)
    return sum(counts.values()), sum(n for status, n in counts.items() if status != "CONCLUIDO")


def operator_key(env: dict[str, str], cwd: Path) -> str:
    command = [*cli(), *OPERATOR_KEY_COMMAND]
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise SystemExit(f"keys create failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def measure_serve(args: argparse.Namespace) -> Side:
    side = Side("serve (embedded default)")
    workdir = Path(tempfile.mkdtemp(prefix="wa_footprint_"))
    env = bench_env()
    if args.source:
        env["PYTHONPATH"] = str(Path(args.source).resolve())
    procs = Procs("footprint")
    try:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        began = time.monotonic()
        proc = procs.start("serve", [*cli(), "serve", "--port", str(port)], env, cwd=workdir)
        wait_http(f"{url}/readyz", proc, timeout=STARTUP_TIMEOUT)
        side.ready_s = time.monotonic() - began
        settle(proc)
        side.processes = snapshot(proc.pid)
        side.idle_cpu_percent = idle_cpu_percent(proc.pid, args.idle_seconds)
        if args.jobs:
            key = operator_key(env, workdir)
            database = workdir / "worker_automation.db"
            first0 = time.monotonic()
            asyncio.run(dispatch_all(url, key, 1, in_flight=1))
            while finished_jobs(database)[0] < 1 and time.monotonic() - first0 < BURST_TIMEOUT:
                time.sleep(0.02)
            side.first_job_s = time.monotonic() - first0
            done_before, _ = finished_jobs(database)
            cpu0, wall0 = cpu_seconds(proc.pid, with_children=True), time.monotonic()
            asyncio.run(dispatch_all(url, key, args.jobs, in_flight=2, batch=100))
            ended, failed = 0, 0
            while ended < args.jobs and time.monotonic() - wall0 < BURST_TIMEOUT:
                time.sleep(0.05)
                ended, failed = finished_jobs(database)
                ended -= done_before
            side.burst_wall_s = time.monotonic() - wall0
            side.burst_cpu_s = cpu_seconds(proc.pid, with_children=True) - cpu0
            side.burst_failed = failed + (args.jobs - ended)
            time.sleep(args.after_burst_seconds)
            side.after_burst = snapshot(proc.pid)
        time_the_stop(side, proc, signal.SIGINT)
    finally:
        procs.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return side


def flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def measure_celery(args: argparse.Namespace, broker: str) -> Side:
    side = Side(f"plain celery worker -c {args.celery_concurrency}", note="redis-server's CPU not counted")
    env = bench_env(BENCH_FOOTPRINT_REDIS=broker)
    procs = Procs("footprint-celery")
    flush(broker)
    try:
        began = time.monotonic()
        command = [
            sys.executable, "-m", "celery", "-A", "bench.footprint_celery_app", "worker",
            "-c", str(args.celery_concurrency), "-P", "prefork", "-l", "INFO",
        ]  # fmt: skip
        proc = procs.start("celery", command, env, cwd=ROOT)
        wait_output(proc, "ready.", timeout=STARTUP_TIMEOUT)
        side.ready_s = time.monotonic() - began
        settle(proc)
        side.processes = snapshot(proc.pid)
        side.idle_cpu_percent = idle_cpu_percent(proc.pid, args.idle_seconds)
        if args.jobs:
            from celery import Celery

            client = Celery("footprint-client", broker=broker, backend=broker)
            cpu0, wall0 = cpu_seconds(proc.pid, with_children=True), time.monotonic()
            results = [
                client.send_task("footprint.noop", args=[n], queue="footprint_noop") for n in range(args.jobs)
            ]
            done = [result.get(timeout=BURST_TIMEOUT) for result in results]
            side.burst_wall_s = time.monotonic() - wall0
            side.burst_cpu_s = cpu_seconds(proc.pid, with_children=True) - cpu0
            side.burst_failed = sum(1 for n, value in enumerate(done) if value != n)
        time_the_stop(side, proc, signal.SIGTERM)
    finally:
        procs.close()
        flush(broker)
    return side


def flower_celery(args: argparse.Namespace) -> list[str] | None:
    """The command that starts Flower, when one is installed."""
    if args.flower_celery:
        return [args.flower_celery]
    if importlib.util.find_spec("flower") is not None:
        return [sys.executable, "-m", "celery"]
    if FLOWER_CELERY.exists():
        return [str(FLOWER_CELERY)]
    return None


def measure_flower(args: argparse.Namespace, broker: str) -> Side:
    side = Side("Flower (idle)")
    command = flower_celery(args)
    if command is None:
        side.note = "not installed: column skipped (see bench.flower_compare for how to install it)"
        return side
    procs = Procs("footprint-flower")
    try:
        port = free_port()
        env = bench_env(FLOWER_UNAUTHENTICATED_API="true")
        began = time.monotonic()
        proc = procs.start(
            "flower",
            [*command, "--broker", broker, "flower", f"--port={port}", "--address=127.0.0.1",
             "--persistent=False", "--logging=warning"],
            env,
        )  # fmt: skip
        wait_http(f"http://127.0.0.1:{port}/healthcheck", proc, timeout=STARTUP_TIMEOUT)
        side.ready_s = time.monotonic() - began
        settle(proc)
        side.processes = snapshot(proc.pid)
        side.idle_cpu_percent = idle_cpu_percent(proc.pid, args.idle_seconds)
        time_the_stop(side, proc, signal.SIGTERM)
    finally:
        procs.close()
    return side


def stopped(side: Side) -> str:
    if side.stop_s is None:
        return "-" if not side.processes else f"not within {STOP_TIMEOUT:.0f}"
    return f"{fmt(side.stop_s, 2)} ({side.stop_code})"


def report(sides: list[Side], args: argparse.Namespace) -> None:
    for side in sides:
        if not side.processes:
            continue
        print(f"\n{side.name}: {len(side.processes)} processes")
        rows = [[str(pid), name, fmt(pss)] for pid, name, pss in side.processes]
        rows.append(["", "total", fmt(side.pss_total)])
        print(table(["pid", "process", "PSS MiB"], rows))
    print()
    headers = ["", *(side.name for side in sides)]

    def row(title: str, value: object) -> list[str]:
        return [title, *(str(value if not callable(value) else value(side)) for side in sides)]

    burst = f"{args.jobs}-job burst"
    rows = [
        row("processes", lambda s: len(s.processes) or "-"),
        row("PSS total, MiB", lambda s: fmt(s.pss_total) if s.processes else "-"),
        row(f"idle CPU, % of one core over {args.idle_seconds:.0f} s", lambda s: fmt(s.idle_cpu_percent, 2)),
        row(f"{burst}: CPU s", lambda s: fmt(s.burst_cpu_s, 2)),
        row(f"{burst}: wall s", lambda s: fmt(s.burst_wall_s, 2)),
        row(f"{burst}: not done", lambda s: s.burst_failed if s.burst_wall_s is not None else "-"),
        row("one job on the idle tree, s", lambda s: fmt(s.first_job_s, 2)),
        row(
            f"{args.after_burst_seconds:.0f} s after the burst: processes",
            lambda s: len(s.after_burst) or "-",
        ),
        row(
            f"{args.after_burst_seconds:.0f} s after the burst: PSS MiB",
            lambda s: fmt(sum(pss for _p, _l, pss in s.after_burst)) if s.after_burst else "-",
        ),
        row("start to ready, s", lambda s: fmt(s.ready_s)),
        row("stop signal to exit, s (exit code)", stopped),
    ]
    print(table(headers, rows))
    for side in sides:
        if side.note:
            print(f"- {side.name}: {side.note}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--jobs", type=int, default=200, help="jobs in the burst (0: no burst)")
    parser.add_argument(
        "--after-burst-seconds", type=float, default=45.0, help="serve: idle wait before the last look"
    )
    parser.add_argument("--source", help="run serve from this copy of the package")
    parser.add_argument("--redis-db", type=int, default=14, help="the plain Celery's Redis database")
    parser.add_argument("--celery-concurrency", type=int, default=EMBEDDED_POOL_SIZE)
    parser.add_argument("--flower-celery", help="a celery executable whose environment has flower")
    parser.add_argument("--only", choices=["serve", "celery", "flower"], action="append")
    args = parser.parse_args()
    stop_cleanly_on_sigterm()
    print_facts()
    if args.source:
        print(f"serve runs the package in {args.source}", flush=True)
    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    wanted = args.only or ["serve", "celery", "flower"]
    sides = []
    if "serve" in wanted:
        sides.append(measure_serve(args))
    if "celery" in wanted:
        sides.append(measure_celery(args, broker))
    if "flower" in wanted:
        sides.append(measure_flower(args, broker))
    report(sides, args)


if __name__ == "__main__":
    main()
