"""How a worker process's reports reach the API whatever happens to the API or to the process.

Two records on disk, per machine: the jobs the process holds (:class:`HeldJobs`, written before a
claim and removed once the job's end is kept or answered) and the reports of jobs' ends not yet
answered (:class:`Outbox`). Reports the API did not answer (down, 5xx) stay kept and are sent
again in the background with capped backoff, and before the next claim; what a dead process left
in either record is sent or reported by the next process of the same machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Final

from worker_automation.domain.vocabulary import Fault
from worker_automation.worker.client import ApiError, LostAnswer, WorkerApiClient
from worker_automation.worker.held import HeldJobs
from worker_automation.worker.http import ApiTimeout, ApiUnreachable
from worker_automation.worker.outbox import Entry, Kind, Outbox
from worker_automation.worker.patience import Stopped, delays, patiently, sleep_unless, unanswered

log = logging.getLogger(__name__)

# What sending a report may raise; of these, only an API error below 500 is an answer.
UNANSWERED = (ApiUnreachable, ApiTimeout, ApiError)
# The fault a process reports at start-up for a job a dead process of its machine held.
WORKER_LOST: Final = Fault.WORKER_LOST.value
# A claim the API recorded but whose answer never arrived: the automation never ran.
NOT_STARTED: Final = Fault.NOT_STARTED.value
# A job a dead process held and the API still has AGENDADO: that process's claim may still be on
# its way through the API (a process killed just after sending it, an API slow after a restart)
# and land after the answer, leaving the job EXECUTANDO with nobody running it. It is reported
# again, at growing intervals from the first, for this long; a claim the API had not acted on by
# then was not going to be (the dead process's own timeout was 30 s).
CLAIM_IN_FLIGHT_SECONDS: Final = 30.0
CLAIM_IN_FLIGHT_FIRST_DELAY: Final = 0.5
CLAIM_IN_FLIGHT_MAX_DELAY: Final = 8.0


class Reports:
    """The outbox and the held-jobs ledger of one process, and the delivery of what they keep."""

    def __init__(
        self,
        client: WorkerApiClient,
        outbox: Outbox | None = None,
        held: HeldJobs | None = None,
        stopping: asyncio.Event | None = None,
    ) -> None:
        self.client = client
        self.outbox = outbox
        self.held = held
        self.stopping = stopping
        # Reports whose sending got no answer: kept on disk, sent again until answered.
        self.kept: list[Entry] = []
        # Held jobs left by dead processes whose report got no answer yet.
        self._lost: list[tuple[int, str | None]] = []
        self._sending = asyncio.Lock()
        self._retry: asyncio.Task[None] | None = None
        # Jobs left behind still AGENDADO, reported again while a late claim may land; a claim of
        # one by this process takes it over (under the lock, so no report is on its way then).
        self.unclaimed: dict[int, asyncio.Task[None]] = {}
        self._unclaimed_guard = asyncio.Lock()

    # --- the held-jobs ledger -----------------------------------------------------------------

    def holding(self, job_id: int, task_id: str | None) -> None:
        """Before a claim is sent: should the process die from here on, the next one reports it."""
        if self.held is None:
            return
        try:
            self.held.hold(job_id, task_id)
        except OSError as exc:
            log.warning("job %s: not written to the held-jobs ledger (%s)", job_id, exc)

    def not_held(self, job_id: int) -> None:
        """The job's end is kept or answered, or it was never ours."""
        if self.held is not None:
            self.held.release(job_id)

    # --- the outbox ---------------------------------------------------------------------------

    def keep_completion(self, job_id: int, result: Any, task_id: str | None) -> Entry | None:
        """The completion kept in the outbox; None without one (the caller then awaits its answer)."""
        if self.outbox is None:
            return None
        try:
            entry = self.outbox.hold(job_id, result, task_id)
        except (OSError, TypeError, ValueError) as exc:
            log.warning("job %s: completion not kept in the outbox (%s); awaiting its answer", job_id, exc)
            return None
        self.not_held(job_id)
        return entry

    def keep_failure(
        self, job_id: int, error: str, exc_type: str | None, traceback: str | None, task_id: str | None
    ) -> Entry | None:
        if self.outbox is None:
            return None
        try:
            entry = self.outbox.hold_failure(job_id, error, exc_type, traceback, task_id)
        except OSError as exc:
            log.warning("job %s: failure not kept in the outbox (%s); awaiting its answer", job_id, exc)
            return None
        self.not_held(job_id)
        return entry

    async def send(self, entry: Entry) -> bool:
        """Send a report without an outbox (its answer awaited; the job stays in the ledger until
        it is answered, so that a process dying before then leaves it to be reported)."""
        if entry.kind is Kind.COMPLETE:
            still_ours = await self.client.complete(entry.job_id, entry.result, task_id=entry.task_id)
        else:
            still_ours = await self._fail(entry)
        self.not_held(entry.job_id)
        return still_ours

    async def _fail(self, entry: Entry) -> bool:
        return await self.client.fail(
            entry.job_id, entry.error or "", entry.exc_type, entry.traceback, task_id=entry.task_id
        )

    async def deliver(self, entry: Entry, on_sent: Callable[[], None] | None = None) -> bool:
        """Send a kept report; out of the outbox once answered (whatever the answer), kept and
        sent again later when no answer came. Raises what the client raised."""
        assert self.outbox is not None
        try:
            if entry.kind is Kind.COMPLETE:
                still_ours = await self.client.complete(
                    entry.job_id, entry.result, on_sent=on_sent, task_id=entry.task_id
                )
            else:
                still_ours = await self._fail(entry)
        except UNANSWERED as exc:
            if unanswered(exc):
                self._keep(entry)
            else:
                self.outbox.release(entry)
            raise
        self.outbox.release(entry)
        return still_ours

    def _keep(self, entry: Entry) -> None:
        self.kept.append(entry)
        self._retry_later()

    async def send_kept(self) -> int:
        """Send the kept reports once more (one sender at a time); how many were answered."""
        async with self._sending:
            kept, self.kept = self.kept, []
            return await self._send_all(kept)

    async def answered(self) -> bool:
        """Send the kept reports once more; True when none is left without an answer (one that
        the background retry is sending counts as left until its answer is in)."""
        async with self._sending:
            if self.kept:
                kept, self.kept = self.kept, []
                await self._send_all(kept)
            return not self.kept

    async def flush(self) -> bool:
        """Send what is kept until all of it is answered, with capped backoff; False when the
        process started shutting down first (it stays in the outbox for the next process).

        A pool process waits here, inside the job's task, rather than leaving the report to the
        background: its task stays active in the worker meanwhile, which is what tells the API's
        reconciler that a process still carries the run."""
        waits = delays()
        while not await self.answered():
            if not await sleep_unless(self.stopping, next(waits)):
                return False
        return True

    async def _send_all(self, entries: list[Entry]) -> int:
        answered = 0
        for entry in entries:
            try:
                recorded = await self.deliver(entry)
            except UNANSWERED as exc:
                if unanswered(exc):
                    log.warning("job %s: %s still not recorded: %s", entry.job_id, entry.kind.value, exc)
                    continue
                log.error("job %s: %s refused: %s", entry.job_id, entry.kind.value, exc)
            else:
                outcome = "recorded" if recorded else "no longer ours"
                log.info("job %s: %s sent again (%s)", entry.job_id, entry.kind.value, outcome)
            answered += 1
        return answered

    def _retry_later(self) -> None:
        """Keep sending what is kept, with capped backoff, until all of it is answered (the job
        would otherwise stay EXECUTANDO until this process happens to claim again or exits)."""
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._retry_until_answered())

    async def _retry_until_answered(self) -> None:
        waits = delays()
        while self.kept or self._lost:
            if not await sleep_unless(self.stopping, next(waits)):
                return
            if self.kept:
                await self.send_kept()
            if self._lost:
                lost, self._lost = self._lost, []
                await self._report_lost(lost)

    # --- what dead processes left ----------------------------------------------------------

    async def resend_left_behind(self) -> int:
        """Send the reports that processes which died before their answer left in the outbox;
        how many were answered (a conflict means it had been recorded after all)."""
        if self.outbox is None:
            return 0
        async with self._sending:
            return await self._send_all(list(self.outbox.left_behind()))

    async def report_held_left_behind(self) -> int:
        """Report the jobs that dead processes of this machine held as ``worker_lost``; how many
        the API acted on. A job whose end a dead process kept in the outbox is not reported: the
        outbox sends that end (call :meth:`resend_left_behind` first)."""
        if self.held is None:
            return 0
        left: list[tuple[int, str | None]] = []
        for entry in self.held.left_behind():
            if self.outbox is not None and self.outbox.keeps(entry.job_id):
                self.held.release(entry.job_id)
                continue
            left.append((entry.job_id, entry.task_id))
        return await self._report_lost(left)

    async def _report_lost(self, jobs: list[tuple[int, str | None]]) -> int:
        acted = 0
        for job_id, task_id in jobs:
            try:
                answer = await self.client.lost(job_id, WORKER_LOST, task_id)
                if answer is LostAnswer.ENDED:
                    acted += 1
                    log.warning("job %s was held by a process that died: reported %s", job_id, WORKER_LOST)
                elif answer is LostAnswer.UNCLAIMED:
                    log.info("job %s held by a process that died is still AGENDADO: watched", job_id)
                    self._watch_unclaimed(job_id, task_id)
                    continue
                else:
                    log.info("job %s held by a process that died: nothing left to do", job_id)
            except UNANSWERED as exc:
                if unanswered(exc):
                    log.warning("job %s: %s not reported yet: %s", job_id, WORKER_LOST, exc)
                    self._lost.append((job_id, task_id))
                    self._retry_later()
                    continue
                log.error("job %s: %s refused: %s", job_id, WORKER_LOST, exc)
            assert self.held is not None
            self.held.release(job_id)
        return acted

    def _watch_unclaimed(self, job_id: int, task_id: str | None) -> None:
        if job_id not in self.unclaimed:
            watch = asyncio.get_running_loop().create_task(self._report_until_claimed(job_id, task_id))
            self.unclaimed[job_id] = watch

    async def _report_until_claimed(self, job_id: int, task_id: str | None) -> None:
        """Report ``job_id`` lost again while the API has it AGENDADO, for CLAIM_IN_FLIGHT_SECONDS;
        then its ledger entry goes (unless this process claimed the job meanwhile: the entry is
        its own then)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLAIM_IN_FLIGHT_SECONDS
        waits = delays(CLAIM_IN_FLIGHT_FIRST_DELAY, CLAIM_IN_FLIGHT_MAX_DELAY)
        outcome = f"still AGENDADO after {CLAIM_IN_FLIGHT_SECONDS:.0f}s: no claim of the dead process landed"
        while (delay := next(waits)) and loop.time() + delay <= deadline:
            if not await sleep_unless(self.stopping, delay):
                return  # shutting down: the entry stays for the next process
            async with self._unclaimed_guard:
                if self.unclaimed.get(job_id) is not asyncio.current_task():
                    return  # this process is claiming it: its claim decides
                try:
                    answer = await self.client.lost(job_id, WORKER_LOST, task_id)
                except UNANSWERED as exc:
                    log.warning("job %s: %s not reported yet: %s", job_id, WORKER_LOST, exc)
                    continue
            if answer is not LostAnswer.UNCLAIMED:
                outcome = "reported" if answer is LostAnswer.ENDED else "nothing left to do"
                break
        async with self._unclaimed_guard:
            if self.unclaimed.get(job_id) is asyncio.current_task():
                del self.unclaimed[job_id]
                assert self.held is not None
                self.held.release(job_id)
                log.info("job %s held by a process that died: %s", job_id, outcome)

    async def claiming(self, job_id: int) -> bool:
        """Before this process claims ``job_id``: True when a dead process of this machine held it
        and the API still had it AGENDADO (its claim may yet land, so a refusal as already claimed
        may be that claim: the caller reports it then). Its watch ends here."""
        if job_id not in self.unclaimed:
            return False
        async with self._unclaimed_guard:
            watch = self.unclaimed.pop(job_id, None)
        if watch is None:
            return False
        watch.cancel()
        return True

    async def report_own_lost(self, job_id: int, task_id: str | None) -> None:
        """A claim of ours that may have gone through unanswered: the API says "already claimed"
        and cannot tell us it was us, so the run is reported lost (ended or re-queued if it was
        ours, nothing done otherwise)."""
        with contextlib.suppress(Stopped):
            await patiently(
                lambda: self.client.lost(job_id, NOT_STARTED, task_id), f"job {job_id}: lost", self.stopping
            )
            self.not_held(job_id)

    async def close(self) -> None:
        """Before the process exits: try what is kept once more and let the records go (what is
        still in them is then the next process's)."""
        watches = [*self.unclaimed.values(), *([self._retry] if self._retry is not None else [])]
        self.unclaimed = {}
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        if self.kept:
            await self.send_kept()
        if self.outbox is not None:
            self.outbox.close()
        if self.held is not None:
            self.held.close()
