"""Recovery from single faults at a few hundred jobs (the "recovery" target of bench/README.md).

Each row starts a fresh set-up on a PostgreSQL cluster and a ``redis-server`` of the benchmark's
own (free ports, temporary directories: the faults stop and restart them), queues ``--jobs`` jobs
of the demo automations, injects one fault while they run, and measures the seconds from the
fault's end until every job of the database is resolved. Then, from the status ledger a trigger
keeps (``tests/integration/fault_support.py``): lost (still AGENDADO, cancelled, or failed without
ever running), stuck (still EXECUTANDO), duplicated (started more often than sent back plus one).
Target: 0 / 0 / 0 and <= 60 s per row with the default ``WA_RECOVERY_SECONDS`` (60).

    python -m bench.faults --jobs 300                      # every fault, default window
    python -m bench.faults --jobs 300 --recovery-seconds 10
    python -m bench.faults --soak                          # 30 min, 5,000 jobs, random faults
    python -m bench.faults --soak --soak-minutes 3 --soak-jobs 500 --dead-minutes 1

Two rows look at one run each rather than at throughput (third-round targets): ``postgres_finish`` stops
PostgreSQL while runs finish, ``--repeat`` times (their ends wait in the workers' outboxes; the
outcome each run reached must be the one recorded: 0 outcomes changed), and ``machine_dead``
kills a dedicated machine mid-run and leaves it dead (its runs must be resolved within the
recovery window of its socket's close).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import print_facts, stop_cleanly_on_sigterm, table
from bench.fault_setup import (
    API_OUTAGE_SECONDS,
    HEADERS,
    PG_OUTAGE_SECONDS,
    POOL_CONCURRENCY,
    Bench,
    Dispatcher,
    Row,
    kill_tree,
    orphans_of,
)
from bench.fault_soak import soak
from tests.integration.fault_support import JobFate, Ledger, SqliteLedger
from tests.integration.harness import (
    Proc,
    Processes,
    clean_env,
    cli_command,
    free_port,
    run_cli,
    wait_ready,
    wait_until,
)

FAULTS = ("redis", "postgres", "postgres_finish", "api", "worker", "machine", "machine_dead", "embedded")
SCOPES = "worker_automation:read,worker_automation:write"
# The runs of each outage of the postgres_finish row (one per pool process), and their length:
# they end a few seconds into the outage.
FINISHING_RUNS = 4
FINISHING_RUN_SECONDS = 2.0
# The runs a dedicated machine holds when it is killed and left dead.
MACHINE_DEAD_RUNS = 2
# What a row waits beyond the recovery window for the jobs to drain, before calling them stuck.
DRAIN_SECONDS = 120.0
STEP_TIMEOUT = 60.0


def open_count(ledger: Ledger) -> int:
    """Jobs not resolved yet (taken just before a fault: how much of the work it hits)."""
    return sum(1 for f in ledger.fates().values() if not f.resolved)


def started_count(ledger: Ledger) -> int:
    return sum(1 for f in ledger.fates().values() if f.starts > 0)


def wait_started(ledger: Ledger, count: int) -> None:
    wait_until(lambda: started_count(ledger) >= count, STEP_TIMEOUT, f"fewer than {count} jobs started", 0.2)


def wait_running(ledger: Ledger) -> None:
    def running() -> bool:
        return any(f.status == "EXECUTANDO" for f in ledger.fates().values())

    wait_until(running, STEP_TIMEOUT, "no job running", 0.1)


def queue_jobs(dispatcher: Dispatcher, jobs: int, long_runs: int, long_seconds: float) -> int:
    """``long_runs`` demo.sleep jobs (running when the fault hits) then demo.echo jobs."""
    created = 0
    for n in range(jobs):
        if n < long_runs:
            made = dispatcher.send("demo.sleep", {"seconds": long_seconds})
        else:
            made = dispatcher.send("demo.echo", {"n": n})
        created += made is not None
    return created


def fault_redis(bench: Bench) -> Row:
    with bench.stack() as (stack, ledger, dispatcher):
        jobs = queue_jobs(dispatcher, bench.args.jobs, 2, 2.0)
        stack.pool_worker("scan", POOL_CONCURRENCY)
        wait_started(ledger, 5)
        hit = open_count(ledger)
        bench.redis.restart()
        return bench.judge("Redis restarted, no persistence", ledger, jobs, open_at_fault=hit)


def fault_postgres(bench: Bench) -> Row:
    with bench.stack() as (stack, ledger, dispatcher):
        stack.pool_worker("scan", POOL_CONCURRENCY)
        stop = threading.Event()
        interval = 14.0 / bench.args.jobs  # spread over the outage and a little around it

        def feed() -> None:
            n = 0
            while not stop.is_set() and n < bench.args.jobs:
                n += 1
                # Faster than the workers drain them: the outage meets claims and reports too.
                dispatcher.send("demo.sleep", {"seconds": 0.2})
                time.sleep(interval)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        time.sleep(2.0)
        hit = open_count(ledger)
        bench.pg.stop()
        time.sleep(PG_OUTAGE_SECONDS)
        bench.pg.start()
        fault_end = time.monotonic()
        feeder.join()
        label = f"PostgreSQL down {PG_OUTAGE_SECONDS:.0f} s during dispatch"
        row = bench.judge(label, ledger, None, fault_end=fault_end, open_at_fault=hit)
        row.note = f"dispatch answers (HTTP status: count): {dispatcher.answers}"
        return row


def fault_api(bench: Bench) -> Row:
    with bench.stack() as (stack, ledger, dispatcher):
        jobs = queue_jobs(dispatcher, bench.args.jobs, 4, 1.0)
        stack.pool_worker("scan", POOL_CONCURRENCY)
        wait_started(ledger, 5)
        assert stack.serve_proc is not None
        hit = open_count(ledger)
        orphans = orphans_of(kill_tree(stack.serve_proc))
        time.sleep(API_OUTAGE_SECONDS)
        stack.serve()
        label = f"API SIGKILL, down {API_OUTAGE_SECONDS:.0f} s"
        return bench.judge(label, ledger, jobs, orphans, open_at_fault=hit)


def fault_worker(bench: Bench) -> Row:
    with bench.stack() as (stack, ledger, dispatcher):
        key = stack.register_machine(queue="scan")
        name = f"faults-scan-{stack.port}@bench"
        jobs = queue_jobs(dispatcher, bench.args.jobs, 4, 3.0)
        worker = stack.pool_worker("scan", POOL_CONCURRENCY, key=key, name=name)
        wait_running(ledger)
        hit = open_count(ledger)
        orphans = orphans_of(kill_tree(worker))
        stack.pool_worker("scan", POOL_CONCURRENCY, key=key, name=name)
        return bench.judge("Celery worker main process SIGKILL", ledger, jobs, orphans, open_at_fault=hit)


def fault_machine(bench: Bench) -> Row:
    with bench.stack() as (stack, ledger, dispatcher):
        key = stack.register_machine(automation="demo.echo")
        jobs = queue_jobs(dispatcher, bench.args.jobs, 0, 0.0)
        machine = stack.machine("demo.echo", key=key)
        wait_started(ledger, max(1, bench.args.jobs // 10))
        hit = open_count(ledger)
        orphans = orphans_of(kill_tree(machine))
        stack.machine("demo.echo", key=key)
        return bench.judge("dedicated machine SIGKILL", ledger, jobs, orphans, open_at_fault=hit)


def wait_all(ledger: Ledger, ids: list[int], status: str | None) -> None:
    """Until every job of ``ids`` is in ``status`` (None: resolved)."""

    def reached() -> bool:
        fates = ledger.fates()
        found = [fates.get(i) for i in ids]
        return all(f is not None and (f.resolved if status is None else f.status == status) for f in found)

    wait_until(reached, STEP_TIMEOUT, f"jobs {ids} never {status or 'resolved'}", 0.1)


def fault_postgres_finish(bench: Bench) -> Row:
    """PostgreSQL down while runs finish, ``--repeat`` times on one set-up: a run's end waits in
    its worker's outbox and must be the outcome recorded (demo.sleep never fails: any FALHA, and
    any FALHA replaced later by a late report, is an outcome that changed)."""
    with bench.stack() as (stack, ledger, dispatcher):
        stack.pool_worker("scan", FINISHING_RUNS)
        hit = 0
        fault_end = time.monotonic()
        for _ in range(bench.args.repeat):
            made = [
                dispatcher.send("demo.sleep", {"seconds": FINISHING_RUN_SECONDS})
                for _ in range(FINISHING_RUNS)
            ]
            ids = [job for job in made if job is not None]
            wait_all(ledger, ids, "EXECUTANDO")
            hit += len(ids)
            bench.pg.stop()
            time.sleep(PG_OUTAGE_SECONDS)
            bench.pg.start()
            fault_end = time.monotonic()
            with contextlib.suppress(AssertionError):
                wait_all(ledger, ids, None)
        label = f"PostgreSQL down {PG_OUTAGE_SECONDS:.0f} s while runs finish, x{bench.args.repeat}"
        row = bench.judge(label, ledger, None, fault_end=fault_end, open_at_fault=hit)
        fates = row.verdict.fates.values()
        failed = sum(1 for f in fates if f.status == "FALHA")
        replaced = sum(1 for f in fates if any(old == "FALHA" for old, _new, _task in f.changes))
        row.note = (
            f"{hit} runs finished during {bench.args.repeat} outages; outcomes changed: "
            f"{failed + replaced} (ended FALHA: {failed}; FALHA replaced by a late report: {replaced})"
        )
        return row


def fault_machine_dead(bench: Bench) -> Row:
    """A dedicated machine SIGKILLed mid-run and never started again: its runs end machine_lost
    (demo.sleep is not idempotent); seconds count from the kill, which closes its socket."""
    with bench.stack() as (stack, ledger, dispatcher):
        key = stack.register_machine(automation="demo.sleep")
        machine = stack.machine("demo.sleep", key=key, concurrency=MACHINE_DEAD_RUNS)
        made = [dispatcher.send("demo.sleep", {"seconds": 600}) for _ in range(MACHINE_DEAD_RUNS)]
        ids = [job for job in made if job is not None]
        wait_all(ledger, ids, "EXECUTANDO")
        hit = open_count(ledger)
        tree = kill_tree(machine)
        closed = time.monotonic()
        orphans = orphans_of(tree)
        label = "dedicated machine SIGKILL, left dead"
        row = bench.judge(label, ledger, len(ids), orphans, fault_end=closed, open_at_fault=hit)
        lost = sum(1 for f in row.verdict.fates.values() if "machine_lost" in (f.error or ""))
        seconds = row.verdict.seconds
        row.note = f"{lost} of {len(ids)} runs ended machine_lost {seconds:.1f} s after the socket closed"
        return row


def fault_embedded(bench: Bench) -> Row:
    bench.rows += 1
    workdir = bench.root / f"row{bench.rows}"
    (workdir / "project").mkdir(parents=True)
    procs = Processes(workdir / "logs")
    procs.directory.mkdir()
    project = workdir / "project"
    env = clean_env(WA_RECOVERY_SECONDS=str(bench.args.recovery_seconds), WA_LOG_LEVEL="warning")
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"

    def serve() -> Proc:
        proc = procs.start("serve-embedded", [*cli_command(), "serve", "--port", str(port)], env, project)
        wait_ready(api_url, proc, STEP_TIMEOUT)
        return proc

    try:
        first = serve()
        ledger = SqliteLedger(project / "worker_automation.db")
        ledger.install()
        key = run_cli(["keys", "create", "--perfil", "administrador", "--scopes", SCOPES], env, project)
        dispatcher = Dispatcher(api_url, key)
        try:
            jobs = queue_jobs(dispatcher, bench.args.jobs, 1, 5.0)
        finally:
            dispatcher.close()
        wait_started(ledger, 5)
        hit = open_count(ledger)
        orphans = orphans_of(kill_tree(first))
        serve()
        return bench.judge("embedded serve SIGKILL", ledger, jobs, orphans, open_at_fault=hit)
    finally:
        procs.close()


RUNNERS: dict[str, Callable[[Bench], Row]] = {
    "redis": fault_redis,
    "postgres": fault_postgres,
    "postgres_finish": fault_postgres_finish,
    "api": fault_api,
    "worker": fault_worker,
    "machine": fault_machine,
    "machine_dead": fault_machine_dead,
    "embedded": fault_embedded,
}


def describe_problems(row: Row) -> None:
    worst: list[JobFate] = [*row.verdict.lost, *row.verdict.stuck, *row.verdict.duplicated]
    for fate in worst[:5]:
        print(f"  {row.fault}: {fate.describe()}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {FAULTS}")
    parser.add_argument("--recovery-seconds", type=float, default=60.0, help="WA_RECOVERY_SECONDS")
    parser.add_argument(
        "--drain-seconds", type=float, default=DRAIN_SECONDS,
        help="how long past the recovery window a row waits before counting jobs lost or stuck",
    )  # fmt: skip
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (printed path)")
    parser.add_argument("--soak", action="store_true", help="random faults for --soak-minutes")
    parser.add_argument("--soak-minutes", type=float, default=30.0)
    parser.add_argument("--soak-jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=10, help="outages of the postgres_finish row")
    parser.add_argument(
        "--soak-faults", default="redis,postgres,api,worker,machine",
        help="comma-separated: the faults the soak draws from",
    )  # fmt: skip
    parser.add_argument(
        "--dead-minutes", type=float, default=5.0,
        help="the soak: how long every other killed machine stays dead before it is started again",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=None, help="the soak's random seed")
    args = parser.parse_args(argv)
    chosen = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown:
        parser.error(f"--faults: unknown {unknown}; choose among {FAULTS}")
    stop_cleanly_on_sigterm()
    print_facts()
    print(f"WA_RECOVERY_SECONDS={args.recovery_seconds:g}")
    with contextlib.ExitStack() as scope:
        if args.keep_logs:
            tmp = tempfile.mkdtemp(prefix="wa-faults-")
            print(f"logs kept in {tmp}", file=sys.stderr)
        else:
            tmp = scope.enter_context(tempfile.TemporaryDirectory(prefix="wa-faults-"))
        bench = Bench(args, Path(tmp))
        try:
            if args.soak:
                return soak(bench)
            rows: list[Row] = []
            for fault in chosen:
                started = time.monotonic()
                row = RUNNERS[fault](bench)
                rows.append(row)
                describe_problems(row)
                print(f"  {row.fault}: row done in {time.monotonic() - started:.0f} s", file=sys.stderr)
            print(table(HEADERS, [row.cells() for row in rows]))
            for row in rows:
                if row.note:
                    print(f"{row.fault}: {row.note}")
        finally:
            bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
