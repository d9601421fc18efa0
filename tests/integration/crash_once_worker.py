"""``worker-automation worker`` whose first Celery worker stops on an unrecoverable error once it
is up (as when kombu's Redis channel fails on a broken connection): run as a script, with the
command's arguments. The started-again process finds the restart count in its environment and
runs the real worker untouched."""

from __future__ import annotations

import sys

from worker_automation.worker.restart import RESTARTS_ENV


def break_the_event_loop() -> None:
    """The consumer's event loop raises what the worker cannot recover from."""
    from celery.worker import loops

    def broken_loop(*_args: object, **_kwargs: object) -> None:
        raise AttributeError("'NoneType' object has no attribute 'hostname'")

    loops.asynloop = broken_loop


if __name__ == "__main__":
    import os

    if RESTARTS_ENV not in os.environ:
        break_the_event_loop()
    from worker_automation.cli import main

    sys.exit(main(sys.argv[1:]))
