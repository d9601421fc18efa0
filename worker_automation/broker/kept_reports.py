"""What a pool worker tells about the reports of runs that ended and are not answered yet.

A pool process reports a run's end without waiting for the answer, and its task returns once the
report is sent: from then on Celery's ``inspect`` shows the run nowhere, while the report may sit
in the machine's outbox for a long while (the API or its database away, a backoff of up to 30 s).
A run whose end is kept is not lost, so each pool worker answers one more inspection, this one:
the runs whose reports its machine keeps on this host (whichever process of the machine keeps
them: a process that died leaves them to the next one, which sends them). The reconciler counts
them as carried by that worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from celery import Celery
from celery.worker.control import inspect_command

log = logging.getLogger(__name__)

COMMAND: Final = "kept_reports"


def register_command(kept: Callable[[], list[dict[str, Any]]]) -> None:
    """In a pool worker's main process: answer :data:`COMMAND` with ``kept()`` (the entries
    ``{"job_id", "task_id"}`` its machine's outbox holds)."""

    def kept_reports(_state: Any, **_kwargs: Any) -> list[dict[str, Any]]:
        try:
            return kept()
        except OSError as exc:
            log.warning("kept reports not listed: %s", exc)
            return []

    inspect_command(name=COMMAND)(kept_reports)


def ask_kept_reports(app: Celery, hosts: list[str], timeout: float) -> dict[str, set[str]]:
    """Per worker (of ``hosts``, those that answered a ping), the task ids whose end its machine
    keeps unanswered. Blocking; a worker without the command, or not answering, counts nothing."""
    if not hosts:
        return {}
    try:
        replies = app.control.broadcast(
            COMMAND, reply=True, timeout=timeout, destination=hosts, limit=len(hosts)
        )
    except Exception as exc:  # the broker went away meanwhile: no evidence either way
        log.info("kept reports not asked: %s", exc)
        return {}
    found: dict[str, set[str]] = {}
    for reply in replies or []:
        for host, entries in reply.items():
            if isinstance(entries, list):
                found[host] = {
                    str(entry["task_id"])
                    for entry in entries
                    if isinstance(entry, dict) and entry.get("task_id")
                }
    return found
