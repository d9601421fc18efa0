"""Demo automations that really run: sleep with progress, echo the context, fail on demand.

They follow the execution contract of ``worker_automation.worker.contract`` and are what demos and
end-to-end tests dispatch, so their behaviour is part of the service's contract.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from worker_automation.worker.contract import AutomationError
from worker_automation.worker.progress import report_progress

DEFAULT_FAIL_MESSAGE = "falha solicitada"

# Sleeping in slices keeps progress moving and lets a cancellation land promptly; a slice of this
# length also caps how often progress is reported, whatever the duration.
_SLICE_SECONDS = 0.2


async def demo_sleep(job_id: int, automation_id: str, context: dict[str, Any]) -> dict[str, Any]:
    """Sleep ``context["seconds"]`` seconds, reporting each whole-percent change, then return it."""
    seconds = context.get("seconds")
    # The form already checks this; repeat it so a direct call cannot sleep forever or crash oddly.
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
        raise AutomationError("Campo 'seconds' deve ser um numero maior ou igual a 0 e finito.")
    total = float(seconds)
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + total
    report_progress(0, f"Aguardando {seconds} s")
    last = 0
    while (remaining := deadline - loop.time()) > 0:
        await asyncio.sleep(min(_SLICE_SECONDS, remaining))
        percent = min(99, int((loop.time() - start) / total * 100))
        if percent > last:
            last = percent
            report_progress(percent)
    report_progress(100, "Concluido")
    return {"slept": seconds}


def demo_echo(job_id: int, automation_id: str, context: dict[str, Any]) -> dict[str, Any]:
    """Return the context it was given, unchanged."""
    return dict(context)


def demo_fail(job_id: int, automation_id: str, context: dict[str, Any]) -> None:
    """Always fail, with ``context["message"]`` (or a default) as the failure message."""
    message = context.get("message") or DEFAULT_FAIL_MESSAGE
    raise AutomationError(str(message))
