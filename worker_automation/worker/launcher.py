"""One process that forks several pool workers, after importing their code once.

Most of a Celery worker's memory is the code it imports (Celery, kombu, redis-py, the package).
Imported once, frozen out of the garbage collector's reach, then forked, it stays in pages the
workers share with this process instead of one copy each. This process passes the stop signal on
to them and ends once they all have; each of them ends with it should it die (``WA_EXIT_WITH_PARENT``
names it to them).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import signal
from collections.abc import Callable, Iterable, Sequence
from types import FrameType
from typing import Any, Final

log = logging.getLogger(__name__)

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
Run = Callable[[list[str]], int]


def _fork_worker(run: Run, argv: Sequence[str], env: dict[str, str]) -> int:
    """Fork a process that runs ``run(argv)`` with ``env`` added to its environment; its pid.
    Called with the stop signals blocked, so none reaches the child before its own handlers."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        os.environ.update(env)
        code = run(list(argv))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        log.exception("pool worker %s failed", " ".join(argv))
    finally:
        logging.shutdown()
        os._exit(code)


def run_pool(workers: dict[str, dict[str, Any]], run: Run, preload: Iterable[str]) -> int:
    """Import ``preload``, then fork one process per entry of ``workers`` running
    ``run(entry["argv"])`` with ``entry["env"]``; return once every one has ended (1 if any failed)."""
    for name in preload:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    children: set[int] = set()

    def forward(signum: int, _frame: FrameType | None) -> None:
        for pid in children:
            os.kill(pid, signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, forward)
    own = {"WA_EXIT_WITH_PARENT": str(os.getpid())}
    for spec in workers.values():
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            children.add(_fork_worker(run, spec["argv"], {**spec["env"], **own}))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    failed = False
    while children:
        pid, status = os.wait()
        children.discard(pid)
        failed = failed or os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0
