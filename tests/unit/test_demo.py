"""Demo automations, progress reporting and the implementation table."""

from __future__ import annotations

import asyncio
import contextvars
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from worker_automation.worker import implementations
from worker_automation.worker.contract import AutomationError
from worker_automation.worker.demo import demo_echo, demo_fail, demo_sleep
from worker_automation.worker.implementations import (
    MissingImplementation,
    load_implementations,
    missing_implementation_message,
)
from worker_automation.worker.progress import report_progress, use_reporter


def plugin_automation(job_id: int, automation_id: str, context: dict[str, Any]) -> str:
    """Stands in for an automation installed by another package."""
    return "ok"


class Recorder:
    """Collects progress reports."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, str | None]] = []

    def __call__(self, percent: int, message: str | None) -> None:
        self.reports.append((percent, message))

    @property
    def percents(self) -> list[int]:
        return [percent for percent, _ in self.reports]


async def test_sleep_reports_progress_and_returns_seconds() -> None:
    recorder = Recorder()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with use_reporter(recorder):
        result = await demo_sleep(1, "demo.sleep", {"seconds": 0.3})
    assert loop.time() - started >= 0.29
    assert result == {"slept": 0.3}
    percents = recorder.percents
    assert percents[0] == 0
    assert percents[-1] == 100
    assert percents == sorted(percents)
    assert len(percents) >= 3


async def test_sleep_zero_and_integer_seconds() -> None:
    recorder = Recorder()
    with use_reporter(recorder):
        assert await demo_sleep(1, "demo.sleep", {"seconds": 0}) == {"slept": 0}
    assert recorder.percents == [0, 100]


async def test_sleep_progress_is_not_flooded() -> None:
    recorder = Recorder()
    with use_reporter(recorder):
        await demo_sleep(1, "demo.sleep", {"seconds": 0.6})
    # One report per 0.2 s slice at most, plus the first and last.
    assert len(recorder.reports) <= 6


async def test_sleep_is_cancellable() -> None:
    task = asyncio.create_task(demo_sleep(1, "demo.sleep", {"seconds": 30}))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("seconds", [-1, float("inf"), "3", True, None])
async def test_sleep_refuses_bad_seconds(seconds: object) -> None:
    with pytest.raises(AutomationError):
        await demo_sleep(1, "demo.sleep", {"seconds": seconds})


def test_echo_returns_its_context() -> None:
    context = {"a": 1, "nested": {"b": [1, 2]}}
    assert demo_echo(7, "demo.echo", context) == context
    assert demo_echo(7, "demo.echo", {}) == {}


def test_fail_raises_with_the_message() -> None:
    with pytest.raises(AutomationError, match=r"^boom$"):
        demo_fail(1, "demo.fail", {"message": "boom"})
    with pytest.raises(AutomationError) as caught:
        demo_fail(1, "demo.fail", {})
    assert str(caught.value) == "falha solicitada"


def test_progress_without_reporter_is_a_noop() -> None:
    report_progress(50, "nobody listens")


def test_progress_is_clamped_and_reporter_restored() -> None:
    outer, inner = Recorder(), Recorder()
    with use_reporter(outer):
        report_progress(-5)
        with use_reporter(inner):
            report_progress(150, "x")
        report_progress(42)
    report_progress(99)
    assert outer.reports == [(0, None), (42, None)]
    assert inner.reports == [(100, "x")]


def test_failing_reporter_does_not_fail_the_automation() -> None:
    def broken(percent: int, message: str | None) -> None:
        raise RuntimeError("api down")

    with use_reporter(broken):
        report_progress(10)


async def test_progress_follows_the_job_into_threads_and_stays_per_job() -> None:
    first, second = Recorder(), Recorder()

    def sync_work(percent: int) -> None:
        report_progress(percent)

    async def job(recorder: Recorder, percent: int) -> None:
        with use_reporter(recorder):
            await asyncio.to_thread(sync_work, percent)
            await asyncio.sleep(0.01)
            report_progress(percent + 1)

    await asyncio.gather(job(first, 10), job(second, 20))
    assert first.percents == [10, 11]
    assert second.percents == [20, 21]
    # A fresh context (e.g. another job's task) sees no reporter.
    contextvars.Context().run(report_progress, 5)
    assert first.percents == [10, 11]


def test_builtin_implementations() -> None:
    found = load_implementations()
    assert found["demo.sleep"] is demo_sleep
    assert found["demo.echo"] is demo_echo
    assert found["demo.fail"] is demo_fail


def test_broken_entry_points_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    group = implementations.ENTRY_POINT_GROUP
    fake = [
        EntryPoint("cnd_federal", "tests.unit.test_demo:plugin_automation", group),
        EntryPoint("broken", "no_such_module_anywhere:fn", group),
        EntryPoint("not_callable", "json:__name__", group),
        EntryPoint("demo.echo", "json:loads", group),
    ]
    found = load_implementations(fake)
    assert found["cnd_federal"] is plugin_automation
    assert "broken" not in found
    assert "not_callable" not in found
    assert found["demo.echo"] is demo_echo
    assert "broken" in caplog.text


def test_missing_implementation_message() -> None:
    message = missing_implementation_message("cnd_federal")
    assert message == "Automacao 'cnd_federal' nao possui implementacao instalada neste worker"
    error = MissingImplementation("cnd_federal")
    assert isinstance(error, AutomationError)
    assert str(error) == message
