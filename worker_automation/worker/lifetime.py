"""Worker processes that end with the process that started them (no orphans after ``kill -9``).

A pool process left running after its Celery worker was killed would go on with a job the API
recovers and hands to another process: two runs of one job at once. Linux can send a process a
signal when its parent ends (``prctl(PR_SET_PDEATHSIG)``); elsewhere this is a no-op.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from typing import Final

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG: Final = 1


def exit_with_parent(expected_parent: int) -> bool:
    """Have the kernel SIGKILL this process when its parent ends; True when it will.

    The parent may have ended before the request took effect (this process was then adopted by
    another): when the parent is no longer ``expected_parent``, this process ends at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        log.warning("cannot ask to end with the parent process: %s", exc)
        return False
    if os.getppid() != expected_parent:
        log.error("parent process %d ended before this one started; exiting", expected_parent)
        os.kill(os.getpid(), signal.SIGKILL)
    return True
