"""A pool worker that forks its pool processes on demand lets them go once idle, except while its
machine's outbox keeps a report that one of them has to send."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from worker_automation.worker.on_demand import OnDemandAutoscaler
from worker_automation.worker.outbox import Outbox


class Pool:
    def __init__(self) -> None:
        self.num_processes = 1
        self.shrunk = 0

    def shrink(self, n: int) -> None:
        self.shrunk += n
        self.num_processes -= n

    def maintain_pool(self) -> None:
        pass


def idle_scaler(pool: Pool) -> Any:
    scaler = OnDemandAutoscaler(pool, 2, 0, keepalive=1)
    scaler._last_scale_up = time.monotonic() - 60  # idle for longer than the keepalive
    return scaler


def test_an_idle_pool_lets_its_processes_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(OnDemandAutoscaler, "outbox", tmp_path / "outbox")
    pool = Pool()
    idle_scaler(pool).maybe_scale()
    assert (pool.shrunk, pool.num_processes) == (1, 0)


def test_a_kept_report_keeps_a_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox")
    monkeypatch.setattr(OnDemandAutoscaler, "outbox", tmp_path / "outbox")
    entry = outbox.hold(7, {"ok": True}, task_id="t-7")
    pool = Pool()
    idle_scaler(pool).maybe_scale()
    assert pool.shrunk == 0
    outbox.release(entry)
    idle_scaler(pool).maybe_scale()
    assert pool.shrunk == 1
