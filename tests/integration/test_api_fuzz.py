"""A few hundred schemathesis cases over the whole OpenAPI document of an embedded ``serve``, both
key kinds on every request: no 5xx, no answer outside the documented schema, no check failed, no
traceback in the server's log (``bench.api_fuzz`` runs the same with thousands of cases)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api_fuzz_support import fuzz, prepare, serve_embedded
from tests.integration.harness import Processes

JOBS = 30


def test_schemathesis_finds_nothing(processes: Processes, tmp_path: Path) -> None:
    served = serve_embedded(processes, tmp_path / "run")
    headers = prepare(served, JOBS)
    run = fuzz(
        served, headers, range(1, JOBS + 1), max_examples=10, seed=7, phases="fuzzing,stateful", timeout=300
    )
    log = (tmp_path / "run" / "schemathesis.log").read_text(encoding="utf-8")[-6000:]
    assert run.cases >= 250, (run, log)
    assert run.phases["fuzzing"] == "success" and run.phases["stateful"] == "success", (run.phases, log)
    assert (run.with_failures, run.failures, run.errors) == (0, {}, []), log
    assert run.server_faults == []
