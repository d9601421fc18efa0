"""A bare Celery app with one no-op task: the yardstick the job pipeline is compared with.

It is built by the service's own ``make_celery`` (same serializer, priorities, late acks,
prefetch of one, started-state tracking, Redis result backend and task events), so the only
difference from a pool worker is the work around the task: no job row, no claim, no report.

    celery -A bench.raw_celery_app worker -Q bench_noop -c 2 -P prefork -E
"""

from __future__ import annotations

import os
from typing import Any

from bench.common import redis_url
from worker_automation.broker.celery_app import make_celery
from worker_automation.settings import Settings

QUEUE = "bench_noop"
TASK_NAME = "bench.noop"
BROKER_URL = os.environ.get("BENCH_RAW_BROKER_URL", redis_url())

settings = Settings(redis_url=BROKER_URL, database_url="sqlite://", task_events=True)
app = make_celery(settings, BROKER_URL, name="bench_raw")


@app.task(name=TASK_NAME)  # type: ignore[untyped-decorator]
def noop(job_id: int) -> dict[str, Any]:
    """Does nothing; returns what a pool worker's task returns, so results are stored alike."""
    return {"outcome": "completed", "reason": None}
