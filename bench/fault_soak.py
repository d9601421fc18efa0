"""The soak of ``bench.faults --soak``: jobs at a steady rate and a random single fault every
30-90 s for the whole run, with a supervisor that restarts what was killed, as systemd would.

Every other dedicated machine killed is left dead for ``--dead-minutes`` (5 by default) before
the supervisor starts it again: its runs must be resolved (``machine_lost``) meanwhile, by the
machine's presence alone. At the end the feed stops, every job of the database must be resolved
within the recovery window plus the drain, and the run prints lost / stuck / duplicated over all
of them (target 0 / 0 / 0).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import dataclass, field

from bench.common import table
from bench.fault_setup import (
    API_OUTAGE_SECONDS,
    HEADERS,
    PG_OUTAGE_SECONDS,
    POOL_CONCURRENCY,
    Bench,
    kill_tree,
    orphans_of,
)
from tests.integration.harness import Proc, Stack

SOAK_FAULTS = ("redis", "postgres", "api", "worker", "machine")
GAP_SECONDS = (30.0, 90.0)


@dataclass
class Fleet:
    """The processes a supervisor keeps running: one pool worker, one dedicated machine."""

    stack: Stack
    pool_key: str
    pool_name: str
    machine_key: str
    dead_seconds: float = 300.0
    pool: Proc | None = None
    machine: Proc | None = None
    restarts: int = 0
    orphans: int = 0
    machine_kills: int = 0
    # Until then a killed machine is left dead (0: the supervisor restarts it when it dies).
    machine_back_at: float = 0.0
    left_dead: int = 0
    log: list[tuple[float, str]] = field(default_factory=list)

    def start_pool(self) -> None:
        self.pool = self.stack.pool_worker("scan", POOL_CONCURRENCY, key=self.pool_key, name=self.pool_name)

    def start_machine(self) -> None:
        self.machine = self.stack.machine("demo.sleep", key=self.machine_key)

    def supervise(self) -> None:
        """Start again whatever died by itself (a supervisor's ``Restart=always``)."""
        if self.pool is not None and not self.pool.alive():
            self.restarts += 1
            self.start_pool()
        if self.machine is not None and not self.machine.alive():
            if self.machine_back_at and time.monotonic() < self.machine_back_at:
                return  # left dead on purpose
            if self.machine_back_at:
                self.machine_back_at = 0.0
            else:
                self.restarts += 1
            self.start_machine()

    def kill_machine(self) -> None:
        """Kill the machine; every other time (the first, third...) leave it dead for
        ``dead_seconds``."""
        assert self.machine is not None
        self.orphans += orphans_of(kill_tree(self.machine))
        self.machine_kills += 1
        if self.machine_kills % 2 == 1:
            self.left_dead += 1
            self.machine_back_at = time.monotonic() + self.dead_seconds
        else:
            self.start_machine()


def inject(bench: Bench, fleet: Fleet, fault: str) -> None:
    stack = fleet.stack
    if fault == "redis":
        bench.redis.restart()
    elif fault == "postgres":
        bench.pg.stop()
        time.sleep(PG_OUTAGE_SECONDS)
        bench.pg.start()
    elif fault == "api":
        assert stack.serve_proc is not None
        fleet.orphans += orphans_of(kill_tree(stack.serve_proc))
        time.sleep(API_OUTAGE_SECONDS)
        stack.serve()
    elif fault == "worker":
        assert fleet.pool is not None
        fleet.orphans += orphans_of(kill_tree(fleet.pool))
        fleet.start_pool()
    elif fault == "machine" and fleet.machine is not None and fleet.machine.alive():
        fleet.kill_machine()


def soak(bench: Bench) -> int:
    args = bench.args
    duration = args.soak_minutes * 60.0
    rng = random.Random(args.seed)
    interval = duration / max(1, args.soak_jobs)
    drawn = [f.strip() for f in args.soak_faults.split(",") if f.strip() in SOAK_FAULTS] or list(SOAK_FAULTS)
    with bench.stack() as (stack, ledger, dispatcher):
        fleet = Fleet(
            stack,
            pool_key=stack.register_machine(queue="scan"),
            pool_name=f"soak-scan-{stack.port}@bench",
            machine_key=stack.register_machine(automation="demo.sleep"),
            dead_seconds=args.dead_minutes * 60.0,
        )
        fleet.start_pool()
        fleet.start_machine()
        stop = threading.Event()
        sent = 0

        def feed() -> None:
            nonlocal sent
            deadline = time.monotonic()
            while not stop.is_set() and sent < args.soak_jobs:
                sent += 1
                if rng.random() < 0.7:
                    dispatcher.send("demo.echo", {"n": sent})
                else:
                    dispatcher.send("demo.sleep", {"seconds": round(rng.uniform(0.2, 2.0), 1)})
                deadline += interval
                time.sleep(max(0.0, deadline - time.monotonic()))

        feeder = threading.Thread(target=feed, daemon=True)
        began = time.monotonic()
        feeder.start()
        next_fault = began + rng.uniform(*GAP_SECONDS)
        last_end = began
        while time.monotonic() - began < duration:
            fleet.supervise()
            if time.monotonic() >= next_fault:
                fault = rng.choice(drawn)
                at = time.monotonic() - began
                inject(bench, fleet, fault)
                last_end = time.monotonic()
                fleet.log.append((at, fault))
                print(f"  {at:6.0f} s  {fault}", file=sys.stderr)
                next_fault = last_end + rng.uniform(*GAP_SECONDS)
            time.sleep(0.5)
        stop.set()
        feeder.join()
        fed_until = time.monotonic()
        row = bench.judge("soak", ledger, None, fleet.orphans, fault_end=fed_until)
        fleet.supervise()
        verdict = row.verdict
        print(f"\nsoak: {args.soak_minutes:g} min, {sent} dispatch attempts, answers {dispatcher.answers}")
        print("faults: " + ", ".join(f"{fault}@{at:.0f}s" for at, fault in fleet.log))
        print(f"processes restarted by the supervisor after dying by themselves: {fleet.restarts}")
        dead = f"left dead {args.dead_minutes:g} min: {fleet.left_dead}"
        print(f"machines killed: {fleet.machine_kills}, {dead}")
        print(table(HEADERS, [row.cells()]))
        for fate in [*verdict.lost, *verdict.stuck, *verdict.duplicated][:10]:
            print(f"  {fate.describe()}", file=sys.stderr)
        lost = len(verdict.lost) + len(verdict.cancelled) + len(verdict.failed_unstarted)
        clean = row.resolved and not (lost or verdict.stuck or verdict.duplicated)
        return 0 if clean else 1
