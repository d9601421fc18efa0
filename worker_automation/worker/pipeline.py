"""One pipeline for every worker process: claim -> run the automation -> report.

The automation function never talks to the API; progress reaches it through
:func:`worker_automation.worker.progress.report_progress`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import traceback as tb
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from worker_automation.worker.client import ApiError, WorkerApiClient
from worker_automation.worker.contract import AutomationFn
from worker_automation.worker.http import ApiTimeout, ApiUnreachable
from worker_automation.worker.implementations import MissingImplementation
from worker_automation.worker.outbox import Entry, Outbox
from worker_automation.worker.progress import use_reporter

log = logging.getLogger(__name__)
# Progress is sent at most this often; the last value is always sent.
PROGRESS_INTERVAL = 0.3
SHUTDOWN_MESSAGE = "shutdown"


class Outcome(StrEnum):
    """How one attempt at a job ended for this worker."""

    COMPLETED = "completed"
    FAILED = "failed"
    REFUSED = "refused"
    LOST = "lost"  # cancelled, moved or otherwise taken away while running


@dataclass(frozen=True)
class RunResult:
    outcome: Outcome
    reason: str | None = None


def _json_safe(value: Any) -> Any:
    json.dumps(value)
    return value


class _ProgressPump:
    """Collects progress from the automation (any thread) and posts it, throttled."""

    def __init__(self, client: WorkerApiClient, job_id: int, on_lost: asyncio.Event) -> None:
        self._client = client
        self._job_id = job_id
        self._loop = asyncio.get_running_loop()
        self._latest: tuple[int, str | None] | None = None
        self._sent: tuple[int, str | None] | None = None
        self._wake = asyncio.Event()
        self._lost = on_lost
        # Started by the first report: most jobs of a busy worker report none.
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def report(self, percent: int, message: str | None) -> None:
        """Called by report_progress, possibly from a worker thread."""
        self._loop.call_soon_threadsafe(self._set, (percent, message))

    def _set(self, value: tuple[int, str | None]) -> None:
        self._latest = value
        self._wake.set()
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._flush()
            await asyncio.sleep(PROGRESS_INTERVAL)

    async def _flush(self) -> None:
        value = self._latest
        if value is None or value == self._sent:
            return
        self._sent = value
        try:
            still_ours = await self._client.progress(self._job_id, value[0], value[1])
        except Exception as exc:
            log.warning("job %s: progress not reported: %s", self._job_id, exc)
            return
        if not still_ours:
            self._lost.set()

    async def close(self, *, flush: bool = False) -> None:
        """Stop pumping; with ``flush``, first send the latest value if it is still unsent."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if flush and not self._lost.is_set():
            await self._flush()


# What sending a completion may raise; of these, only an API error below 500 is an answer.
UNANSWERED = (ApiUnreachable, ApiTimeout, ApiError)


def _answered(exc: Exception) -> bool:
    return isinstance(exc, ApiError) and exc.status_code < 500


class JobPipeline:
    """Claims, runs and reports jobs with the implementations this worker has installed.

    With an ``outbox`` (a pool process, one job at a time) a completion is reported without
    waiting for the API's answer: :meth:`run` returns once the request has been sent, so the API
    records the job while Celery acknowledges it and hands over the next one, and the answer is
    read by the next :meth:`run` (or :meth:`settle`) before it claims anything. The next claim
    therefore never races the previous completion (concurrency limits count the same). The
    completion stays in the outbox until answered, so a process killed in between leaves it for
    the next one to send (:meth:`resend_left_behind`).
    """

    def __init__(
        self,
        client: WorkerApiClient,
        implementations: dict[str, AutomationFn],
        *,
        outbox: Outbox | None = None,
    ) -> None:
        self.client = client
        self.implementations = implementations
        self._outbox = outbox
        self._unanswered: asyncio.Task[bool] | None = None
        # Completions whose sending got no answer (API down): kept on disk, sent before the next
        # claim.
        self._kept: list[Entry] = []

    async def resend_left_behind(self) -> int:
        """Send the completions that processes which died before their answer left in the
        outbox; how many were answered (a conflict means it had been recorded after all)."""
        if self._outbox is None:
            return 0
        return await self._send_kept(list(self._outbox.left_behind()))

    async def _send_kept(self, entries: list[Entry]) -> int:
        """Send completions kept in the outbox; those still without an answer stay kept."""
        answered = 0
        for entry in entries:
            try:
                recorded = await self._deliver(entry)
            except UNANSWERED as exc:
                if not _answered(exc):
                    log.warning("job %s: completion still not recorded: %s", entry.job_id, exc)
                    continue
                log.error("job %s: completion refused: %s", entry.job_id, exc)
            else:
                outcome = "recorded" if recorded else "no longer ours"
                log.info("job %s: completion sent again (%s)", entry.job_id, outcome)
            answered += 1
        return answered

    async def _send_kept_again(self) -> None:
        kept, self._kept = self._kept, []
        await self._send_kept(kept)

    async def _deliver(self, entry: Entry, on_sent: Callable[[], None] | None = None) -> bool:
        """Send a kept completion; out of the outbox once answered (whatever the answer), kept for
        the next try when no answer came. Raises what the client raised."""
        assert self._outbox is not None
        try:
            still_ours = await self.client.complete(
                entry.job_id, entry.result, on_sent=on_sent, task_id=entry.task_id
            )
        except UNANSWERED as exc:
            if _answered(exc):
                self._outbox.release(entry)
            else:
                self._kept.append(entry)
            raise
        self._outbox.release(entry)
        return still_ours

    async def settle(self) -> None:
        """Wait for the answer to the completion still in flight, if any (logged, never raised)."""
        report, self._unanswered = self._unanswered, None
        if report is None:
            return
        try:
            await report
        except Exception as exc:
            log.error("completion report failed: %s", exc)

    async def close(self) -> None:
        """Before the process exits: read the last answer, try what is kept once more, and let
        the outbox go (what is still in it is then the next process's to send)."""
        await self.settle()
        if self._outbox is None:
            return
        await self._send_kept_again()
        self._outbox.close()

    async def run(self, job_id: int, task_id: str | None = None) -> RunResult:
        await self.settle()
        if self._kept:
            await self._send_kept_again()
        claim = await self.client.start(job_id, task_id)
        if not claim.claimed:
            # Refusals are an expected outcome (another machine won, limits, dev mode).
            log.info("job %s not claimed: %s", job_id, claim.reason)
            return RunResult(Outcome.REFUSED, claim.reason)
        assert claim.job is not None
        return await self.execute(claim.job)

    async def execute(self, job: dict[str, Any]) -> RunResult:
        """Run a job this worker has claimed and report how it ended."""
        job_id = int(job["id"])
        automation = str(job["automation_type"])
        fn = self.implementations.get(automation)
        if fn is None:
            error = MissingImplementation(automation)
            await self._report_failure(job_id, error.message, type(error).__name__, None)
            return RunResult(Outcome.FAILED, error.message)
        lost = asyncio.Event()
        pump = _ProgressPump(self.client, job_id, lost)
        work = asyncio.create_task(self._invoke(fn, job_id, automation, dict(job.get("context") or {}), pump))
        watcher = asyncio.create_task(lost.wait())
        try:
            done, _ = await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if work not in done:
                work.cancel()
                log.info("job %s was taken away while running (cancelled or moved); stopped", job_id)
                return RunResult(Outcome.LOST)
            try:
                result = _json_safe(work.result())
            except asyncio.CancelledError:
                raise
            except (TypeError, ValueError) as exc:
                if isinstance(exc, TypeError) and "JSON serializable" in str(exc):
                    message = f"Resultado da automacao nao e serializavel em JSON: {exc}"
                    await self._report_failure(job_id, message, "ResultNotSerializable", None)
                    return RunResult(Outcome.FAILED, message)
                return await self._failed(job_id, exc)
            except Exception as exc:
                return await self._failed(job_id, exc)
            # The automation's last word on progress ("Concluido", say) is kept, not dropped by
            # the throttle; a job that reported nothing costs no extra request.
            await pump.close(flush=True)
            return await self._complete(job_id, result, job.get("task_id"))
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            watcher.cancel()
            await pump.close()

    async def _complete(self, job_id: int, result: Any, task_id: str | None) -> RunResult:
        entry = self._hold(job_id, result, task_id)
        if entry is None:
            if not await self.client.complete(job_id, result, task_id=task_id):
                return RunResult(Outcome.LOST)
            return RunResult(Outcome.COMPLETED)
        sent = asyncio.Event()
        report = asyncio.create_task(self._report_completion(entry, sent.set))
        self._unanswered = report
        waiter = asyncio.create_task(sent.wait())
        try:
            await asyncio.wait({report, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if report.done():
            # Answered (or failed) before it was sent: end as without the background answer.
            self._unanswered = None
            if not report.result():  # raises what the report raised
                return RunResult(Outcome.LOST)
        return RunResult(Outcome.COMPLETED)

    def _hold(self, job_id: int, result: Any, task_id: str | None) -> Entry | None:
        """The completion kept in the outbox; None without one (then its answer is awaited)."""
        if self._outbox is None:
            return None
        try:
            return self._outbox.hold(job_id, result, task_id)
        except (OSError, TypeError, ValueError) as exc:
            log.warning("job %s: completion not kept in the outbox (%s); awaiting its answer", job_id, exc)
            return None

    async def _report_completion(self, entry: Entry, on_sent: Callable[[], None]) -> bool:
        still_ours = await self._deliver(entry, on_sent)
        if not still_ours:
            log.info("job %s was taken away before its completion was recorded", entry.job_id)
        return still_ours

    async def _invoke(
        self, fn: AutomationFn, job_id: int, automation: str, context: dict[str, Any], pump: _ProgressPump
    ) -> Any:
        with use_reporter(pump.report):
            if inspect.iscoroutinefunction(fn):
                return await fn(job_id, automation, context)
            # to_thread copies the context, so report_progress works inside sync automations.
            result = await asyncio.to_thread(fn, job_id, automation, context)
            if inspect.isawaitable(result):
                return await result
            return result

    async def _failed(self, job_id: int, exc: BaseException) -> RunResult:
        message = str(exc) or type(exc).__name__
        summary = "".join(tb.format_exception(exc)[-6:])
        await self._report_failure(job_id, message, type(exc).__name__, summary)
        return RunResult(Outcome.FAILED, message)

    async def _report_failure(self, job_id: int, message: str, exc_type: str, summary: str | None) -> None:
        if not await self.client.fail(job_id, message, exc_type, summary):
            log.info("job %s: failure not recorded, the job is no longer ours", job_id)
