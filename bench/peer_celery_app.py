"""The peer a Celery user would run for records and a live view: Celery with its database result
backend on the same PostgreSQL, task events on (Flower consumes them), and one no-op task.

Built by the service's own ``make_celery`` (same broker settings, priorities, late acks, prefetch
of one, started state, task events, sent events), with the results in PostgreSQL through
SQLAlchemy (``db+postgresql+psycopg2://``: SQLAlchemy 2.1 would pick psycopg 3 by default) and
``result_extended``, so each record keeps the task's name, arguments and worker, as a job row does.
psycopg2 is a benchmark-only need: ``pip install psycopg2-binary``.

    celery -A bench.peer_celery_app worker -Q bench_peer -c 2 -P prefork -E
"""

from __future__ import annotations

import os
from typing import Any

from bench.common import PG_HOST, PG_PORT, PG_USER, redis_url
from worker_automation.broker.celery_app import make_celery
from worker_automation.settings import Settings

QUEUE = "bench_peer"
TASK_NAME = "bench.peer_noop"
DATABASE = "wa_bench_pipeline_peer"
BROKER_URL = os.environ.get("BENCH_PEER_BROKER_URL", redis_url())
RESULTS_URL = f"db+postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{DATABASE}"

settings = Settings(redis_url=BROKER_URL, database_url="sqlite://", task_events=True)
app = make_celery(settings, BROKER_URL, name="bench_peer")
app.conf.update(result_backend=RESULTS_URL, result_extended=True)


@app.task(name=TASK_NAME)  # type: ignore[untyped-decorator]
def noop(job_id: int) -> dict[str, Any]:
    """Does nothing; returns what a pool worker's task returns, so results are stored alike."""
    return {"outcome": "completed", "reason": None}
