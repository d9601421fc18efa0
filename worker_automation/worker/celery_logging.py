"""Logging of the Celery pool workers: the service's own format, one line per event worth reading.

Celery is kept from setting up logging itself (its ``setup_logging`` signal is answered), so its
lines come out in ``WA_LOG_FORMAT`` like every other process's. A task whose claim was refused is
already logged by the pipeline as "not claimed: <reason>": Celery's "succeeded" line for it is
dropped. The warning Celery gives when a worker runs as root is left to the deployment (the image
runs as a user of its own); repeated by every pool process it only buried the start-up lines.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from celery.exceptions import SecurityWarning
from celery.signals import setup_logging

from worker_automation.logs import configure


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


def quiet_celery_logging(log_format: str) -> None:
    """Call before starting the worker (see module doc)."""

    @setup_logging.connect(weak=False)  # type: ignore[untyped-decorator]
    def _own_logging(**_kw: Any) -> None:
        configure(log_format)
        logging.getLogger("celery.app.trace").addFilter(RefusedNotSucceeded())

    warnings.filterwarnings("ignore", category=SecurityWarning)
