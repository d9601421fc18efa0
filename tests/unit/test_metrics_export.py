"""The multiprocess metrics directory: dead processes' live gauges go, their counters stay; the
reconciler's counting function; transitions counted from job views."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from worker_automation.asgi.metrics_export import (
    MULTIPROC_ENV,
    forget_dead_processes,
    make_multiprocess_dir,
    remove_multiprocess_dir,
)
from worker_automation.infra.metrics import count_recovered, count_transitions


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(done.stdout)


def test_dead_processes_lose_their_live_gauges_not_their_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = dead_pid()
    for name in (f"gauge_livesum_{gone}.db", f"counter_{gone}.db", f"gauge_livesum_{os.getpid()}.db"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))

    assert forget_dead_processes() == 1

    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([f"counter_{gone}.db", f"gauge_livesum_{os.getpid()}.db"])


def test_count_recovered_by_fault() -> None:
    def current() -> float:
        return REGISTRY.get_sample_value("wa_jobs_recovered_total", {"fault": "worker_lost"}) or 0.0

    before = current()
    count_recovered("worker_lost")
    count_recovered("worker_lost", 3)
    count_recovered("worker_lost", 0)
    assert current() == before + 4


@dataclass
class Job:
    automation_type: str
    queue: str
    status: str
    data_inicio: datetime | None
    data_fim: datetime | None


def test_transitions_and_durations_from_job_views() -> None:
    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    labels = {"automation": "unit.metrics", "queue": "scan"}
    start = datetime(2026, 1, 1, tzinfo=UTC)
    count_transitions(
        [
            Job("unit.metrics", "scan", "AGENDADO", None, None),
            Job("unit.metrics", "scan", "CONCLUIDO", start, start + timedelta(seconds=3)),
            Job("unit.metrics", "scan", "FALHA", None, None),  # failed before it ran: no duration
        ]
    )
    assert sample("wa_job_transitions_total", status="AGENDADO", **labels) == 1
    assert sample("wa_job_transitions_total", status="CONCLUIDO", **labels) == 1
    assert sample("wa_job_duration_seconds_count", automation="unit.metrics") == 1
    assert sample("wa_job_duration_seconds_sum", automation="unit.metrics") == 3


def test_directories_of_killed_serves_are_removed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = tmp_path / f"wa-metrics-{dead_pid()}-abc"
    killed.mkdir()
    (killed / "counter_1.db").write_bytes(b"")
    alive = tmp_path / f"wa-metrics-{os.getppid()}-def"
    alive.mkdir()
    other = tmp_path / "unrelated"
    other.mkdir()

    made = make_multiprocess_dir()
    try:
        assert made.parent == tmp_path and made.name.startswith(f"wa-metrics-{os.getpid()}-")
        assert os.environ[MULTIPROC_ENV] == str(made)
        assert not killed.exists() and alive.exists() and other.exists()
    finally:
        remove_multiprocess_dir(made)
    assert not made.exists() and MULTIPROC_ENV not in os.environ
