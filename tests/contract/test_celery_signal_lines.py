"""What ``overrides.celery_signal_lines`` relies on in Celery: the worker's signal handlers say
what they say through ``celery.apps.worker.safe_say``, looked up in that module at each call."""

from __future__ import annotations

import inspect
import signal
from types import SimpleNamespace
from typing import Any

import celery.apps.worker
import pytest
from celery.worker import state

from worker_automation.overrides.celery_signal_lines import route_signal_lines


def test_safe_say_takes_a_message_and_a_stream() -> None:
    assert list(inspect.signature(celery.apps.worker.safe_say).parameters) == ["msg", "f"]


def test_the_warm_shutdown_handler_says_its_line_through_the_routed_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(celery.apps.worker, "safe_say", celery.apps.worker.safe_say)
    monkeypatch.setattr(state, "should_stop", state.should_stop)
    said: list[str] = []

    def say(message: str, _file: Any = None) -> None:
        said.append(message)

    route_signal_lines(say)
    original = signal.getsignal(signal.SIGUSR2)
    try:
        # Installed as a worker installs it, then run as its signal would run it.
        worker = SimpleNamespace(hostname="contract@test")
        celery.apps.worker._shutdown_handler(worker, sig="SIGUSR2", how="Warm", exitcode=0)
        handler = signal.getsignal(signal.SIGUSR2)
        assert callable(handler)
        handler(signal.SIGUSR2, None)
    finally:
        signal.signal(signal.SIGUSR2, original)
    assert said == ["worker: Warm shutdown (MainProcess)"]
