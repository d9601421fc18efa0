"""The pool workers an embedded ``serve`` starts: the ``worker`` command itself, one per queue,
all forked from one process, run by ``python -m worker_automation.cli.embedded_worker``.

One process imports the worker's code (Celery, kombu, redis-py, the package: most of a worker's
memory), freezes it out of the garbage collector's reach, then forks one ``worker -Q QUEUE`` per
queue (:mod:`worker_automation.worker.launcher`). The workers share those pages with it instead
of each importing its own copy. It passes the stop signal on to them and ends once they all have;
the kernel ends them should it die.

Three differences besides. What it says: Celery logs ``Connected to redis://...`` when it reaches its
broker, which in embedded mode is the in-process broker of ``serve``. Read by someone who never
installed a Redis, that line suggests one is needed, so it names the embedded broker instead.
And what its pool processes copy: everything the worker has built before it forks them is frozen
out of the garbage collector's reach first, so that collections in a pool process do not write
to (and so copy) every page they share with the worker. And how often it asks its broker: an
idle Celery worker sends a blocking pop that gives up after a second and sends it again, each
answered by Python inside ``serve``; here the pop waits :data:`BROKER_WAIT_SECONDS` instead (a
message still arrives at once). A stopping worker first waits for its pop's answer, so that wait
is also how long Ctrl-C on an idle ``serve`` can take; a shorter one costs idle CPU instead (a
2 s wait stopped in 1.3-2.4 s instead of 3.5-3.7 s, at 1.17-1.20% of a core instead of
0.92-0.97% side by side: docs/decisions/0045-embedded-broker-wait-kept-at-ten-seconds.md).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
from typing import Any, Final

from worker_automation.worker.launch_spec import POOL_VARIABLE

# Celery's logger for the broker connection line of its consumer.
CONNECTION_LOGGER: Final = "celery.worker.consumer.connection"
EMBEDDED_BROKER_LINE: Final = "Connected to the embedded broker of serve"
# How long the worker's blocking pop waits for a message before asking again (kombu's
# ``polling_interval`` of the Redis transport sets it; the worker's event loop never sleeps on it).
BROKER_WAIT_SECONDS: Final = 10.0
# What every worker imports before it reads its settings: imported once, shared by all of them.
SHARED_MODULES: Final = (
    "worker_automation.cli",
    "worker_automation.cli.processes",
    "worker_automation.worker.pool",
    "celery.apps.worker",
    # Celery's command line (click, click-repl, prompt_toolkit, pygments: a third of a worker's
    # imports), which starts the worker.
    "celery.bin.celery",
    "celery.concurrency.prefork",
    "celery.events.dispatcher",
    "celery.events.receiver",
    "celery.worker.autoscale",
    "celery.worker.consumer",
    "celery.worker.heartbeat",
    "celery.worker.loops",
    "celery.worker.pidbox",
    "kombu.mixins",
    "kombu.pidbox",
    "kombu.transport.redis",
    "redis",
)


class EmbeddedBrokerWording(logging.Filter):
    """``Connected to redis://...`` becomes :data:`EMBEDDED_BROKER_LINE`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Connected to"):
            record.msg, record.args = EMBEDDED_BROKER_LINE, ()
        return True


def before_start(sender: Any = None, **_kw: Any) -> None:
    """Celery's ``worker_init``: the worker is built, its pool and broker connection not yet."""
    if sender is not None:
        sender.app.conf.broker_transport_options["polling_interval"] = BROKER_WAIT_SECONDS
    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    if argv is None and POOL_VARIABLE in os.environ:
        from worker_automation.worker.launcher import run_pool
        from worker_automation.worker.lifetime import exit_with_parent

        parent = os.environ.pop("WA_EXIT_WITH_PARENT", None)
        if parent is not None:
            exit_with_parent(int(parent))
        return run_pool(json.loads(os.environ.pop(POOL_VARIABLE)), main, SHARED_MODULES)
    from celery.signals import worker_init

    # On the logger itself: the handlers Celery's start-up installs leave it in place.
    logging.getLogger(CONNECTION_LOGGER).addFilter(EmbeddedBrokerWording())
    worker_init.connect(before_start, weak=False)
    from worker_automation.cli import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
