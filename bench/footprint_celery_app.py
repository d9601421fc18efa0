"""A plain Celery app with one no-op task, run as users run a bare ``celery worker``: the
yardstick of ``bench.footprint``. Stock settings, Redis broker and results, nothing of ours.

    BENCH_FOOTPRINT_REDIS=redis://127.0.0.1:6379/14 celery -A bench.footprint_celery_app worker
"""

from __future__ import annotations

import os

from celery import Celery

QUEUE = "footprint_noop"
BROKER_URL = os.environ.get("BENCH_FOOTPRINT_REDIS", "redis://127.0.0.1:6379/14")

app = Celery("footprint", broker=BROKER_URL, backend=BROKER_URL)
app.conf.update(task_default_queue=QUEUE, broker_connection_retry_on_startup=True)


@app.task(name="footprint.noop")  # type: ignore[untyped-decorator]
def noop(n: int) -> int:
    """Does nothing but hand its argument back."""
    return n
