"""Logging of the Celery pool workers: the service's own format, one line per event worth reading.

Celery is kept from setting up logging itself (its ``setup_logging`` signal is answered), so its
lines come out in ``WA_LOG_FORMAT`` like every other process's. A task whose claim was refused is
already logged by the pipeline as "not claimed: <reason>": Celery's "succeeded" line for it is
dropped. The warning Celery gives when a worker runs as root is left to the deployment (the image
runs as a user of its own); repeated by every pool process it only buried the start-up lines.
What Celery prints from its signal handlers ("Warm shutdown", ...) comes out as one log line in
the same format, minus its advice to press Ctrl-C again: these workers are stopped by ``serve``
or by a supervisor, never from a terminal of their own.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from datetime import UTC, datetime
from typing import Any

import celery.apps.worker
from celery.exceptions import SecurityWarning
from celery.signals import setup_logging

from worker_automation.logs import configure

SIGNAL_LOGGER = "celery.apps.worker"


class RefusedNotSucceeded(logging.Filter):
    """Drops ``Task ... succeeded ...: {'outcome': 'refused', ...}`` from ``celery.app.trace``."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, dict):
            value = args.get("return_value")
            if isinstance(value, str) and "'outcome': 'refused'" in value:
                return False
            if isinstance(value, dict) and value.get("outcome") == "refused":
                return False
        return True


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

    # Celery looks this function up at each call; there is no setting for these messages.
    celery.apps.worker.safe_say = say

    @setup_logging.connect(weak=False)  # type: ignore[untyped-decorator]
    def _own_logging(**_kw: Any) -> None:
        configure(log_format)
        logging.getLogger("celery.app.trace").addFilter(RefusedNotSucceeded())

    warnings.filterwarnings("ignore", category=SecurityWarning)
