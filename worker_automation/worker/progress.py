"""How automation code reports progress without knowing about the API or the job it runs in.

The runtime installs a reporter for the job with ``use_reporter``; the automation just calls
``report_progress``. A ``ContextVar`` keeps concurrent jobs in one process apart, and it follows the
job into ``asyncio.to_thread`` and tasks it creates, since both copy the current context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from worker_automation.domain.ranges import PROGRESS_MAX, PROGRESS_MIN

logger = logging.getLogger(__name__)

Reporter = Callable[[int, str | None], None]

_reporter: ContextVar[Reporter | None] = ContextVar("worker_automation_progress_reporter", default=None)


def report_progress(percent: int, message: str | None = None) -> None:
    """Forward ``percent`` (clamped to PROGRESS_MIN..PROGRESS_MAX) and an optional message to the
    current job's reporter.

    Does nothing when no reporter is installed, so automations also run outside a worker (tests,
    scripts). A failing reporter is logged and ignored: progress is advisory and must never
    fail the job itself.
    """
    reporter = _reporter.get()
    if reporter is None:
        return
    clamped = max(PROGRESS_MIN, min(PROGRESS_MAX, int(percent)))
    try:
        reporter(clamped, message)
    except Exception:
        logger.warning("progress reporter failed (percent=%s)", clamped, exc_info=True)


@contextmanager
def use_reporter(reporter: Reporter) -> Iterator[None]:
    """Install ``reporter`` for the code run inside the ``with`` block, restoring the previous one."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)
