"""Logging of the Celery pool workers: the service's own format, one line per event worth reading.

Celery is kept from setting up logging itself (its ``setup_logging`` signal is answered), so its
lines come out in ``WA_LOG_FORMAT`` like every other process's. Celery's "Task ... succeeded"
line is replaced by one line of ours per run: the job, its automation, how the run ended and how
long it took, never what the job carried (a failure's message can hold context values; the job's
own page shows it to those allowed to read it). A run that failed is logged as failed, not as a
task that succeeded. A task whose claim was refused is already logged by the pipeline as "not
claimed: <reason>": it gets no line here. The warning Celery gives when a worker runs as root is
left to the deployment (the image runs as a user of its own); repeated by every pool process it
only buried the start-up lines, and so did the autoscaler's "Scaling up/down" at every burst.
What Celery prints from its signal handlers ("Warm shutdown",
...) comes out as one log line in the same format, minus its advice to press Ctrl-C again: these
workers are stopped by ``serve`` or by a supervisor, never from a terminal of their own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import warnings
from datetime import UTC, datetime
from typing import Any, Final

from celery.app.trace import LOG_SUCCESS
from celery.exceptions import SecurityWarning
from celery.signals import setup_logging

from worker_automation.catalog.registry import TASK_PREFIX
from worker_automation.infra.logs import configure
from worker_automation.overrides.celery_signal_lines import route_signal_lines

SIGNAL_LOGGER = "celery.apps.worker"
AUTOSCALE_LOGGER: Final = "celery.worker.autoscale"
# The one line per run: ``job 12 (demo.echo): completed in 0.012s``.
JOBS_LOGGER: Final = "worker_automation.worker.jobs"
# What a job's task returns, as Celery shows it: ``{'outcome': 'failed', 'reason': ...}``.
_OUTCOME = re.compile(r"^\{'outcome': '([a-z_]+)'")
# Its one argument, the job id: ``(12,)`` or ``[12]``.
_JOB_ID = re.compile(r"\d+")


class JobOutcomeLine(logging.Filter):
    """On ``celery.app.trace``: each of our tasks' "succeeded" lines becomes one line of
    :data:`JOBS_LOGGER` (job, automation, outcome, seconds), or none for a refused claim."""

    def filter(self, record: logging.LogRecord) -> bool:
        data = record.args
        if record.msg != LOG_SUCCESS or not isinstance(data, dict):
            return True
        name = str(data.get("name", ""))
        outcome = _OUTCOME.search(str(data.get("return_value", "")))
        if not name.startswith(f"{TASK_PREFIX}.") or outcome is None:
            return True  # not a job's task: Celery's line as it is
        if outcome.group(1) != "refused":
            job = _JOB_ID.search(str(data.get("args", "")))
            level = logging.WARNING if outcome.group(1) == "failed" else logging.INFO
            logging.getLogger(JOBS_LOGGER).log(
                level,
                "job %s (%s): %s in %.3fs",
                job.group(0) if job else "?",
                name.removeprefix(f"{TASK_PREFIX}."),
                outcome.group(1),
                float(data.get("runtime") or 0.0),
            )
        return False


def signal_line(message: str, log_format: str) -> str | None:
    """What a message printed from a signal handler becomes (None: nothing)."""
    text = " ".join(message.split())
    if not text or "Ctrl+C" in text:
        return None
    now = time.time()
    if log_format == "json":
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        entry = {"time": stamp, "level": "INFO", "logger": SIGNAL_LOGGER, "message": text, "request_id": None}
        return json.dumps(entry)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"
    return f"{stamp} INFO {SIGNAL_LOGGER}: {text}"


def quiet_celery_logging(log_format: str) -> None:
    """Call before starting the worker (see module doc)."""

    def say(message: str, _file: Any = None) -> None:
        # Runs inside signal handlers: a plain write, no logging locks (as Celery's own).
        line = signal_line(message, log_format)
        if line is not None:
            os.write(2, (line + "\n").encode("utf-8", "replace"))

    route_signal_lines(say)

    @setup_logging.connect(weak=False)  # type: ignore[untyped-decorator]
    def _own_logging(**_kw: Any) -> None:
        configure(log_format)
        logging.getLogger("celery.app.trace").addFilter(JobOutcomeLine())
        # "Scaling up/down N processes" at every burst: the pool follows the work by design
        # (pool processes only while there are jobs), so that is no news to a reader.
        logging.getLogger(AUTOSCALE_LOGGER).setLevel(logging.WARNING)

    warnings.filterwarnings("ignore", category=SecurityWarning)
