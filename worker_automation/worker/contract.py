"""The execution contract between the worker runtime and an automation's code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

# ``fn(job_id, automation_id, context)``: the return value is reported as the job's result, a raised
# exception's message as its failure. Sync functions are run off the event loop by the runtime.
AutomationFn: TypeAlias = Callable[[int, str, dict[str, Any]], Any | Awaitable[Any]]


class AutomationError(Exception):
    """An expected failure of an automation; its message is what the job's failure shows."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PermanentError(AutomationError):
    """A failure that running again cannot mend (bad input, a closed account): the job ends FALHA
    now, whatever attempts its automation has left."""
