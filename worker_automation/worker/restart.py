"""Starting a Celery worker again, in place, after it stopped on an error nobody asked for.

Celery ends its worker on an "unrecoverable error" and some of those are ordinary: when Redis
restarts while the worker holds unacknowledged messages, kombu's Redis channel can fail while
closing the broken connection (``AttributeError`` on the connection's client, kombu 5.x) and the
worker exits. Without a supervisor restarting it, its queue would stop being served. So
``worker-automation worker`` starts itself again: the same command in the same process (its
parent, say an embedded ``serve``, keeps its child), after a delay that grows while it keeps
failing soon after starting. A shutdown asked for (SIGTERM, SIGINT, SIGQUIT) is never undone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final, NoReturn

log = logging.getLogger(__name__)

# How many restarts in a row the process has behind it (carried across exec by the environment).
RESTARTS_ENV: Final = "WA_WORKER_RESTARTS"
RESTART_DELAYS_SECONDS: Final = (1.0, 2.0, 5.0, 10.0, 30.0)
# A worker that ran this long before failing is not in a crash loop: its delays start over.
STEADY_SECONDS: Final = 60.0


def restarts_so_far(environ: Mapping[str, str]) -> int:
    try:
        return max(0, int(environ.get(RESTARTS_ENV, "0")))
    except ValueError:
        return 0


def restart_delay(restarts: int, ran_seconds: float) -> tuple[float, int]:
    """The delay before the next start and the count of restarts in a row it makes."""
    if ran_seconds >= STEADY_SECONDS:
        restarts = 0
    return RESTART_DELAYS_SECONDS[min(restarts, len(RESTART_DELAYS_SECONDS) - 1)], restarts + 1


def child_pids(pid: int) -> list[int]:
    """The live children of ``pid`` (Linux ``/proc``; elsewhere none are found)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            children.extend(int(part) for part in task.read_text().split())
    return children


def start_again(ran_seconds: float, exit_code: int) -> NoReturn:
    """Replace this process with a fresh start of the same command, after the delay due. Any
    pool process still alive is killed first: nothing may go on running a job unseen."""
    delay, restarts = restart_delay(restarts_so_far(os.environ), ran_seconds)
    log.error(
        "the Celery worker stopped on an error (exit code %d) after %.0f s; starting it again in %.0f s",
        exit_code,
        ran_seconds,
        delay,
    )
    for pid in child_pids(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(delay)
    os.environ[RESTARTS_ENV] = str(restarts)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)
