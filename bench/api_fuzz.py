"""Schemathesis over the whole OpenAPI document (``/api/v1/openapi.json``) of an embedded ``serve``.

A fresh ``worker-automation serve`` on a SQLite file in a temporary directory (embedded broker
and workers), an operator key with read and write and a machine key made with the CLI, ``--jobs``
demo jobs; then the ``schemathesis`` CLI with every check on, both keys on every request, all four
phases (examples, coverage, fuzzing, stateful) and ``--max-examples`` per operation. Prints the
cases run, failures by check, errors, 5xx answers, tracebacks in the server's log and wall time.
Target: at least 5,000 cases, no failure of any check (no 5xx, no answer outside the documented
schema). Exits 1 when anything failed.

    python -m bench.api_fuzz --max-examples 250 --seed 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.common import Procs, fmt, print_facts, stop_cleanly_on_sigterm, table
from tests.integration.api_fuzz_support import fuzz, prepare, serve_embedded


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-examples", type=int, default=250, help="cases per operation and phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="schemathesis workers (threads)")
    parser.add_argument("--jobs", type=int, default=40, help="demo jobs whose ids the runs draw from")
    args = parser.parse_args()
    stop_cleanly_on_sigterm()
    print_facts()
    procs = Procs("api_fuzz")
    with tempfile.TemporaryDirectory(prefix="wa_api_fuzz_") as tmp:
        try:
            served = serve_embedded(procs, Path(tmp))
            headers = prepare(served, args.jobs)
            run = fuzz(
                served,
                headers,
                range(1, args.jobs + 1),
                max_examples=args.max_examples,
                seed=args.seed,
                workers=args.workers,
            )
        finally:
            procs.close()
        summary = [
            [
                datetime.now(UTC).date().isoformat(),
                run.cases,
                run.with_failures,
                run.server_errors,
                len(run.errors),
                len(run.server_faults),
                fmt(run.seconds),
            ]
        ]
        print(
            table(
                ["date", "cases", "with failures", "5xx", "errors", "server tracebacks", "wall s"],
                summary,
            )
        )
        print("phases: " + ", ".join(f"{name} {status}" for name, status in run.phases.items()))
        if run.failures:
            print(table(["failed check", "count"], sorted(run.failures.items())))
        for line in [*run.errors, *run.server_faults][:20]:
            print(line)
        if run.with_failures or run.errors or run.server_faults:
            print((Path(tmp) / "schemathesis.log").read_text(encoding="utf-8")[-6000:])
            sys.exit(1)


if __name__ == "__main__":
    main()
