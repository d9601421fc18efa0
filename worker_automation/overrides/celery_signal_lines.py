"""Where a Celery worker's signal handlers write what they say.

Celery's worker prints "worker: Warm shutdown (MainProcess)" and its other signal-time messages
through ``celery.apps.worker.safe_say``, straight to the standard streams, in no log format: no
setting or signal routes them. The function is looked up in its module at each call, so replacing
it there sends those messages wherever ``say`` writes (one log line in ``WA_LOG_FORMAT``, see
``worker.celery_logging``). Without it, a worker logging JSON writes lines that are not JSON.

``tests/contract/test_celery_signal_lines.py`` fails when a release stops calling it this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import celery.apps.worker

Say = Callable[[str, Any], None]


def route_signal_lines(say: Say) -> None:
    """Have this process's Celery worker say its signal-time messages through ``say(message, file)``."""
    celery.apps.worker.safe_say = say
