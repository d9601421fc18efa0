"""Pool processes on demand: a pool worker with ``pool_on_demand`` forks its pool processes as
jobs arrive and lets them go once idle (Celery's autoscaler: up to the queue's count, down to
none), so an idle worker holds one process instead of one per job it may run at once.

A pool process also carries what its runs left behind: the reports of runs that ended while the
API did not answer, kept in its machine's outbox and sent again from the process's own loop.
With no process left nobody would send them until the next job came, and the reconciler counts
a kept report as a run still carried. So the pool keeps its processes while the outbox holds one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from celery.worker.autoscale import Autoscaler

from worker_automation.worker.outbox import kept_in

# Celery's setting naming the autoscaler class, and this one's import path.
AUTOSCALER_SETTING = "worker_autoscaler"
AUTOSCALER_PATH = "worker_automation.worker.on_demand:OnDemandAutoscaler"


class OnDemandAutoscaler(Autoscaler):  # type: ignore[misc]
    """Celery's autoscaler, which does not scale down while :attr:`outbox` keeps a report."""

    # The machine's outbox directory (one pool worker per process: set before the worker starts).
    outbox: ClassVar[Path | None] = None

    def scale_down(self, n: int) -> Any:
        if self.outbox is not None and kept_in(self.outbox):
            return None
        return super().scale_down(n)
