"""One pipeline for every worker process: claim -> run the automation -> report.

The automation function never talks to the API; progress reaches it through
:func:`worker_automation.worker.progress.report_progress`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import logging
import threading
import traceback as tb
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from worker_automation.catalog.registry import TIME_LIMIT_GRACE_SECONDS, TIMEOUT_EXC_TYPE, timeout_message
from worker_automation.infra.cancelling import cancel_and_wait
from worker_automation.worker.client import ApiError, Claim, WorkerApiClient
from worker_automation.worker.contract import AutomationFn, PermanentError
from worker_automation.worker.held import HeldJobs
from worker_automation.worker.http import ApiTimeout, ApiUnreachable
from worker_automation.worker.implementations import MissingImplementation
from worker_automation.worker.outbox import Entry, Kind, Outbox
from worker_automation.worker.patience import patiently, unanswered
from worker_automation.worker.progress import use_reporter
from worker_automation.worker.reports import NOT_STARTED, UNANSWERED, Reports

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


async def _until_returned(thread: list[asyncio.Future[Any]], job_id: int) -> None:
    """Wait for a stopped run's thread (a sync automation cannot be interrupted) to return, for up
    to the grace the API gives a run past its limit: until then the run keeps its slot and its
    end is not reported, so no retry of the job starts beside a thread still running it."""
    if not thread or thread[0].done():
        return
    log.warning("job %s: its automation still runs in a thread; waiting for it to return", job_id)
    await asyncio.wait(thread, timeout=TIME_LIMIT_GRACE_SECONDS)
    if not thread[0].done():
        log.error(
            "job %s: its automation's thread still runs %g s after the run was stopped; its slot is "
            "given back",
            job_id,
            TIME_LIMIT_GRACE_SECONDS,
        )
    else:
        thread[0].exception()  # read: its outcome (any error) belongs to the stopped run


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
        await cancel_and_wait(self._task)
        if flush and not self._lost.is_set():
            await self._flush()


class JobPipeline:
    """Claims, runs and reports jobs with the implementations this worker has installed.

    With an ``outbox`` and ``answer_in_background`` (a pool process, one job at a time) a
    completion is reported without waiting for the API's answer: :meth:`run` returns once the
    request has been sent, so the API records the job while Celery acknowledges it and hands over
    the next one, and the answer is read by the next :meth:`run` (or :meth:`settle`) before it
    claims anything. The next claim therefore never races the previous completion (concurrency
    limits count the same). Reports stay in the outbox until answered, so a process killed in
    between leaves them for the next one to send (:meth:`resend_left_behind`), and those the API
    did not answer are sent again until it does (see ``Reports``).

    A claim the API does not answer (down, restarting, 5xx) is asked again with capped backoff
    until it is answered or ``stopping`` is set (``patience.Stopped`` is raised then).

    With ``own_time_limits`` (a dedicated machine) a run is stopped on this process's clock once
    it has run for the ``timeout_seconds`` its claim answer carries, and reported as a timeout; a
    pool process leaves that to Celery's time limits (:meth:`time_limit_passed`).
    """

    def __init__(
        self,
        client: WorkerApiClient,
        implementations: dict[str, AutomationFn],
        *,
        outbox: Outbox | None = None,
        held: HeldJobs | None = None,
        stopping: asyncio.Event | None = None,
        answer_in_background: bool = True,
        own_time_limits: bool = False,
    ) -> None:
        self.client = client
        self.own_time_limits = own_time_limits
        self._threads = 0
        self._threads_lock = threading.Lock()
        self.implementations = implementations
        self.reports = Reports(client, outbox, held, stopping)
        self.stopping = stopping
        self._background = answer_in_background and outbox is not None
        self._unanswered: asyncio.Task[bool] | None = None

    async def resend_left_behind(self) -> int:
        """Send the reports that processes which died before their answer left in the outbox;
        how many were answered (a conflict means it had been recorded after all)."""
        return await self.reports.resend_left_behind()

    async def recover_left_behind(self) -> tuple[int, int]:
        """At a process's start: the reports dead processes of this machine left are sent, then
        the jobs they held and never reported are reported lost. (sent, reported)."""
        sent = await self.reports.resend_left_behind()
        return sent, await self.reports.report_held_left_behind()

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
        the outbox and the ledger go (what is still in them is then the next process's)."""
        await self.settle()
        await self.reports.close()

    async def run(self, job_id: int, task_id: str | None = None) -> RunResult:
        claim = await self.claim_settled(job_id, task_id)
        if not claim.claimed:
            return RunResult(Outcome.REFUSED, claim.reason)
        assert claim.job is not None
        return await self.execute(claim.job)

    async def claim_settled(self, job_id: int, task_id: str | None = None) -> Claim:
        """The first half of :meth:`run`: the answer still in flight read, then the claim."""
        await self.settle()
        claim = await self.claim(job_id, task_id)
        if not claim.claimed:
            # Refusals are an expected outcome (another machine won, limits, dev mode).
            log.info("job %s not claimed: %s", job_id, claim.reason)
        return claim

    async def claim(self, job_id: int, task_id: str | None = None) -> Claim:
        """Claim ``job_id``, first sending the reports kept for lack of an answer (they free the
        slots this claim is counted against); waits while the API does not answer."""
        # Whether a claim of this machine may have gone through without its answer reaching this
        # process (an earlier attempt below, or a dead process's claim still on its way): refused
        # afterwards as "already claimed", the run may be ours.
        ambiguous = job_id in self.reports.unclaimed and await self.reports.claiming(job_id)
        self.reports.holding(job_id, task_id)

        async def attempt() -> Claim:
            nonlocal ambiguous
            if not await self.reports.answered():
                raise ApiUnreachable("reports kept from before are not answered yet")
            sent: list[bool] = []
            try:
                return await self.client.claim(job_id, task_id, on_sent=lambda: sent.append(True))
            except (ApiUnreachable, ApiTimeout):
                ambiguous = ambiguous or bool(sent)
                raise

        claim = await patiently(attempt, f"job {job_id}: claim", self.stopping)
        if claim.claimed:
            assert claim.job is not None
            if claim.job.get("task_id") != task_id:
                # A machine claims without a task id: the ledger names the run it now holds.
                self.reports.holding(job_id, claim.job.get("task_id"))
            return claim
        if claim.reason == "already_claimed" and ambiguous:
            # An earlier attempt may have gone through without its answer reaching us: if the
            # run is ours, nobody will run it, so it is reported (the API ends or re-queues it).
            try:
                await self.reports.report_own_lost(job_id, task_id)
            except ApiError as exc:
                log.error("job %s: claim without answer not reported: %s", job_id, exc)
        else:
            self.reports.not_held(job_id)
        return claim

    async def hand_back(self, job: dict[str, Any]) -> None:
        """A job claimed as this process stops, which it will not run: reported not started, so
        the API queues it again. An API that does not answer leaves it in the ledger, for this
        machine's next start to report."""
        job_id, task_id = int(job["id"]), job.get("task_id")
        try:
            await self.client.lost(job_id, NOT_STARTED, task_id)
        except UNANSWERED as exc:
            if unanswered(exc):
                log.warning("job %s: claimed while stopping, not handed back yet: %s", job_id, exc)
                return
            log.error("job %s: hand-back refused: %s", job_id, exc)
        log.info("job %s: claimed while stopping; handed back to its queue", job_id)
        self.reports.not_held(job_id)

    async def execute(self, job: dict[str, Any], taken_away: asyncio.Event | None = None) -> RunResult:
        """Run a job this worker has claimed and report how it ended. ``taken_away``, when set,
        stops the run as one the API ended (cancelled, moved, past its limit): not reported."""
        job_id = int(job["id"])
        automation = str(job["automation_type"])
        task_id = job.get("task_id")
        fn = self.implementations.get(automation)
        if fn is None:
            error = MissingImplementation(automation)
            await self._report_failure(job_id, error.message, type(error).__name__, None, task_id)
            return RunResult(Outcome.FAILED, error.message)
        lost = taken_away or asyncio.Event()
        pump = _ProgressPump(self.client, job_id, lost)
        thread: list[asyncio.Future[Any]] = []  # a sync automation's thread, once it runs
        context = dict(job.get("context") or {})
        work = asyncio.create_task(self._invoke(fn, job_id, automation, context, pump, thread))
        watcher = asyncio.create_task(lost.wait())
        limit = self._time_limit(job)
        try:
            done, _ = await asyncio.wait({work, watcher}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                work.cancel()
                await pump.close()
                assert limit is not None
                await _until_returned(thread, job_id)
                return await self.time_limit_passed(job_id, limit, task_id)
            if work not in done:
                work.cancel()
                await _until_returned(thread, job_id)
                log.info("job %s was taken away while running (cancelled or moved); stopped", job_id)
                self.reports.not_held(job_id)
                return RunResult(Outcome.LOST)
            try:
                result = _json_safe(work.result())
            except asyncio.CancelledError:
                raise
            except (TypeError, ValueError) as exc:
                if isinstance(exc, TypeError) and "JSON serializable" in str(exc):
                    message = f"Resultado da automacao nao e serializavel em JSON: {exc}"
                    await self._report_failure(job_id, message, "ResultNotSerializable", None, task_id)
                    return RunResult(Outcome.FAILED, message)
                return await self._failed(job_id, exc, task_id)
            except Exception as exc:
                return await self._failed(job_id, exc, task_id)
            # The automation's last word on progress ("Concluido", say) is kept, not dropped by
            # the throttle; a job that reported nothing costs no extra request.
            await pump.close(flush=True)
            return await self._complete(job_id, result, task_id)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            watcher.cancel()
            await pump.close()

    def _time_limit(self, job: dict[str, Any]) -> float | None:
        """The run's time limit this process enforces itself (see ``own_time_limits``)."""
        limit = job.get("timeout_seconds")
        if not self.own_time_limits or isinstance(limit, bool) or not isinstance(limit, int | float):
            return None
        return float(limit) if limit > 0 else None

    async def time_limit_passed(self, job_id: int, seconds: float, task_id: str | None) -> RunResult:
        """The run of ``job_id`` was stopped at its time limit of ``seconds``: report it FALHA
        ``timeout: ...`` (one attempt: the API applies the automation's retry policy)."""
        message = timeout_message(seconds)
        log.warning("job %s stopped at its time limit (%g s)", job_id, seconds)
        await self._report_failure(job_id, message, TIMEOUT_EXC_TYPE, None, task_id)
        return RunResult(Outcome.FAILED, message)

    async def _complete(self, job_id: int, result: Any, task_id: str | None) -> RunResult:
        entry = self.reports.keep_completion(job_id, result, task_id)
        if entry is None:
            still_ours = await self.reports.send(Entry(Path(), job_id, result, task_id))
            return RunResult(Outcome.COMPLETED if still_ours else Outcome.LOST)
        if not self._background:
            return await self._awaited(entry)
        sent = asyncio.Event()
        report = asyncio.create_task(self._report_completion(entry, sent.set))
        self._unanswered = report
        waiter = asyncio.create_task(sent.wait())
        try:
            await asyncio.wait({report, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if report.done():
            # Answered (or not) before it was sent: end as without the background answer.
            self._unanswered = None
            error = report.exception()
            return await self._ended(entry, error, error is None and report.result())
        return RunResult(Outcome.COMPLETED)

    async def _awaited(self, entry: Entry) -> RunResult:
        try:
            still_ours = await self._report_completion(entry, None)
        except UNANSWERED as exc:
            return await self._ended(entry, exc, False)
        return await self._ended(entry, None, still_ours)

    async def _ended(self, entry: Entry, error: BaseException | None, still_ours: bool) -> RunResult:
        """How a completion kept in the outbox ended: answered, or (the API did not answer) sent
        again until it is, before the job's run is over for this process."""
        if error is not None:
            if not unanswered(error):
                raise error
            log.warning("job %s: completion kept until the API answers (%s)", entry.job_id, error)
            await self.reports.flush()
            return RunResult(Outcome.COMPLETED)
        return RunResult(Outcome.COMPLETED if still_ours else Outcome.LOST)

    async def _report_completion(self, entry: Entry, on_sent: Callable[[], None] | None) -> bool:
        still_ours = await self.reports.deliver(entry, on_sent)
        if not still_ours:
            log.info("job %s was taken away before its completion was recorded", entry.job_id)
        return still_ours

    async def _invoke(
        self,
        fn: AutomationFn,
        job_id: int,
        automation: str,
        context: dict[str, Any],
        pump: _ProgressPump,
        thread: list[asyncio.Future[Any]],
    ) -> Any:
        with use_reporter(pump.report):
            if inspect.iscoroutinefunction(fn):
                return await fn(job_id, automation, context)
            # In a thread with a copy of the context (so report_progress works inside sync
            # automations), as asyncio.to_thread runs it; the thread's future is kept apart,
            # shielded, so that a run stopped here can still wait for its thread to return.
            call = functools.partial(
                contextvars.copy_context().run, self._in_thread, fn, job_id, automation, context
            )
            thread.append(asyncio.get_running_loop().run_in_executor(None, call))
            result = await asyncio.shield(thread[0])
            if inspect.isawaitable(result):
                return await result
            return result

    def _in_thread(self, fn: AutomationFn, job_id: int, automation: str, context: dict[str, Any]) -> Any:
        with self._threads_lock:
            self._threads += 1
        try:
            return fn(job_id, automation, context)
        finally:
            with self._threads_lock:
                self._threads -= 1

    def automations_in_threads(self) -> int:
        """How many sync automations run in threads right now: a stopped run's thread cannot be
        interrupted, and goes on until its function returns."""
        with self._threads_lock:
            return self._threads

    async def _failed(self, job_id: int, exc: BaseException, task_id: str | None) -> RunResult:
        message = str(exc) or type(exc).__name__
        summary = "".join(tb.format_exception(exc)[-6:])
        # Any PermanentError, subclasses too, is reported by that name: the API skips retries.
        exc_type = PermanentError.__name__ if isinstance(exc, PermanentError) else type(exc).__name__
        await self._report_failure(job_id, message, exc_type, summary, task_id)
        return RunResult(Outcome.FAILED, message)

    async def report_failure(
        self, job_id: int, message: str, exc_type: str, summary: str | None, task_id: str | None
    ) -> None:
        """Report the job failed, kept in the outbox until the API answers (when there is one)."""
        await self._report_failure(job_id, message, exc_type, summary, task_id)

    async def _report_failure(
        self, job_id: int, message: str, exc_type: str, summary: str | None, task_id: str | None
    ) -> None:
        entry = self.reports.keep_failure(job_id, message, exc_type, summary, task_id)
        try:
            if entry is None:
                failure = Entry(Path(), job_id, None, task_id, Kind.FAIL, message, exc_type, summary)
                still_ours = await self.reports.send(failure)
            else:
                still_ours = await self.reports.deliver(entry)
        except UNANSWERED as exc:
            if entry is None or not unanswered(exc):
                raise
            log.warning("job %s: failure kept until the API answers (%s)", job_id, exc)
            await self.reports.flush()
            return
        if not still_ours:
            log.info("job %s: failure not recorded, the job is no longer ours", job_id)
