"""Which automations this worker can actually run: the built-in demos plus installed plugins.

Plugins register a function under the entry point group ``worker_automation.automations``, named
after the automation key. A job whose automation has none fails with
``missing_implementation_message``; it is never reported as done.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from worker_automation.worker.contract import AutomationError, AutomationFn
from worker_automation.worker.demo import demo_echo, demo_fail, demo_sleep

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "worker_automation.automations"

BUILTIN_IMPLEMENTATIONS: dict[str, AutomationFn] = {
    "demo.sleep": demo_sleep,
    "demo.echo": demo_echo,
    "demo.fail": demo_fail,
    # demo_sleep under the automation's time limit: a run longer than it ends by timeout.
    "demo.timeout": demo_sleep,
}


def missing_implementation_message(key: str) -> str:
    """The failure message of a job whose automation is not installed on the worker that ran it."""
    return f"Automacao '{key}' nao possui implementacao instalada neste worker"


class MissingImplementation(AutomationError):
    """Raised for a job whose automation has no implementation on this worker."""

    def __init__(self, key: str) -> None:
        super().__init__(missing_implementation_message(key))
        self.key = key


def installed_keys() -> frozenset[str]:
    """The automations this Python environment can run: the built-in demos and the names of the
    installed entry points (not loaded: a name is all a listing needs)."""
    return frozenset(BUILTIN_IMPLEMENTATIONS) | {e.name for e in entry_points(group=ENTRY_POINT_GROUP)}


def load_implementations(entries: Iterable[EntryPoint] | None = None) -> dict[str, AutomationFn]:
    """The built-in demos plus every loadable entry point, keyed by automation key.

    A plugin that fails to import or is not callable is logged and skipped: one broken package
    must not take the whole worker down. The built-in demos cannot be replaced, since their
    behaviour is part of the service's contract. ``entries`` defaults to the installed entry points
    of ``ENTRY_POINT_GROUP``.
    """
    if entries is None:
        entries = entry_points(group=ENTRY_POINT_GROUP)
    found: dict[str, AutomationFn] = dict(BUILTIN_IMPLEMENTATIONS)
    for entry in entries:
        if entry.name in BUILTIN_IMPLEMENTATIONS:
            logger.warning("entry point %r (%s) ignored: built-in automation", entry.name, entry.value)
            continue
        if entry.name in found:
            logger.warning("entry point %r (%s) ignored: already provided", entry.name, entry.value)
            continue
        try:
            fn = entry.load()
        except Exception:
            logger.exception("entry point %r (%s) could not be loaded; skipped", entry.name, entry.value)
            continue
        if not callable(fn):
            logger.error("entry point %r (%s) is not callable; skipped", entry.name, entry.value)
            continue
        found[entry.name] = fn
    return found
