"""Celery pool workers: hear a job as a task on their queue, then run the common pipeline.

Every pool worker is a registered machine serving one queue: it claims through the API with its
``X-Worker-Api-Key`` like any dedicated machine, so the same rules (atomic claim, limits,
dev mode) hold. It never touches the database.

What each fault does to a task message and to its job (``task_acks_late=True``,
``task_reject_on_worker_lost=False``, the Redis ``visibility_timeout`` of two hours; see
``broker/celery_app.py``):

- The API unreachable or answering 5xx at the claim: the task waits in its process with capped
  backoff, its message unacknowledged, until the API answers; a warm shutdown meanwhile hands the
  message back to the queue (``Reject(requeue=True)``). Reports of jobs' ends wait in the outbox.
- A pool process dies (OOM killer, ``kill -9``): its Celery worker sees ``WorkerLostError`` and
  reports the run lost (``/lost``: the API ends it FALHA ``worker_lost``, or queues it again when
  its automation is idempotent), or sends its task again when it had not been claimed
  yet (the late-acked message is acknowledged as failed, not requeued: the claim decides).
- The Celery worker's main process is killed (``kill -9``): its pool processes end with it
  (``PR_SET_PDEATHSIG``), so nothing keeps running a job. The messages it had received stay in
  Redis's ``unacked`` hash, out of every queue, until the visibility timeout (two hours, longer
  than the longest job) puts them back; meanwhile the API's reconciler sends the AGENDADO jobs
  again with a new task id, and the claim refuses the old message when it comes back (stale
  task). The jobs it was running are reported ``worker_lost`` by the next worker process of the
  same machine at its start (the held-jobs ledger), or found by the reconciler.
- A run past its automation's time limit: Celery's soft limit (the task message's) interrupts the
  wait for it, the run is stopped and reported FALHA ``timeout: ...``; a sync automation's thread
  cannot be stopped, so the process waits for it, and Celery's hard limit (a grace later) kills
  the process should it outlast that. A soft limit reached while the claim waits for the API
  hands the message back instead.
- The Celery worker stops on an "unrecoverable error" of its own (kombu failing on a broken Redis
  connection): once its pool has stopped, the command starts itself again in the same process
  (``restart.py``); the late-acked messages it held are in the ``unacked`` hash as above.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, Final, TypeVar

from celery import Celery, Task, states
from celery.exceptions import BackendStoreError, Reject, SoftTimeLimitExceeded, WorkerLostError
from celery.signals import (
    task_failure,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutting_down,
)
from celery.utils.serialization import bytes_to_str
from celery.worker import state as worker_state

from worker_automation.broker.celery_app import JobTaskBackend, make_celery
from worker_automation.broker.kept_reports import register_command
from worker_automation.catalog.registry import celery_time_limits
from worker_automation.domain.vocabulary import PASSING_REFUSALS
from worker_automation.settings import Settings
from worker_automation.worker.celery_logging import quiet_celery_logging
from worker_automation.worker.client import WorkerApiClient, still_unclaimed
from worker_automation.worker.held import HeldJobs, drop_left_behind
from worker_automation.worker.http import ApiTimeout, ApiUnreachable, HttpClient
from worker_automation.worker.implementations import load_implementations
from worker_automation.worker.lifetime import exit_with_parent
from worker_automation.worker.on_demand import AUTOSCALER_PATH, AUTOSCALER_SETTING, OnDemandAutoscaler
from worker_automation.worker.outbox import Outbox, kept_in
from worker_automation.worker.owners import machine_directory
from worker_automation.worker.patience import Stopped
from worker_automation.worker.pipeline import SHUTDOWN_MESSAGE, JobPipeline, Outcome
from worker_automation.worker.reports import WORKER_LOST
from worker_automation.worker.restart import start_again

log = logging.getLogger(__name__)
T = TypeVar("T")
# How long a pool process leaving (warm shutdown, recycling) spends on its last answers.
SETTLE_TIMEOUT_SECONDS: Final = 30.0
# What a Celery worker sends its pool processes when it shuts down: a claim waiting for the API
# gives its message back instead of keeping the shutdown waiting.
STOP_SIGNAL: Final = signal.SIGUSR2
# How long the worker's main process waits for each answer when it reports for its pool processes.
MAIN_REPORT_TIMEOUT_SECONDS: Final = 10.0
# How often a pool process past its soft time limit looks whether the automation's thread ended.
THREAD_POLL_SECONDS: Final = 0.1


class _ProcessState:
    """Per-process (per pool child) event loop, HTTP client and pipeline, created after the fork.

    The loop runs in a thread of its own, so the answer to a job's completion is read while
    Celery acknowledges that task and hands over the next one (see ``JobPipeline``).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pid = os.getpid()
        key = settings.worker_api_key or ""
        self.client = WorkerApiClient(settings.api_url, key, max_result_bytes=settings.max_result_bytes)
        self.stopping = asyncio.Event()
        self.pipeline = JobPipeline(
            self.client,
            load_implementations(),
            outbox=Outbox.for_machine(key),
            held=HeldJobs.for_machine(key, supervisor=os.getppid()),
            stopping=self.stopping,
        )
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="job-pipeline", daemon=True).start()

    def stop(self) -> None:
        """The worker is shutting down: a claim waiting for the API stops waiting (safe to call
        from a signal handler)."""
        self.loop.call_soon_threadsafe(self.stopping.set)

    def run(self, work: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            # Interrupted here (a time limit, a timeout): the work must not go on beside the next.
            future.cancel()
            raise


def _settle_before_exit(**_kw: Any) -> None:
    """A pool process about to exit reads its last answer, sends what is kept once more and
    gives up its outbox (see ``JobPipeline.close``)."""
    state = _state
    if state is not None and state.pid == os.getpid():
        try:
            state.run(state.pipeline.close(), timeout=SETTLE_TIMEOUT_SECONDS)
        except Exception as exc:  # the process is leaving either way
            log.warning("last completion's answer not read before exit: %s", exc)


_state: _ProcessState | None = None


def _process_state(settings: Settings) -> _ProcessState:
    global _state
    if _state is None or _state.pid != os.getpid():
        _state = _ProcessState(settings)
    return _state


class PoolTaskBackend(JobTaskBackend):
    """The job tasks' result backend in the pool processes: each state is written without reading
    the stored one first.

    Celery reads a task's stored state before every write so that a late duplicate cannot
    overwrite a SUCCESS. A job task's SUCCESS is never stored (``JobTaskBackend``: the job's row
    records how it ended), so that read found nothing to protect and cost a Redis round trip on
    every job (its STARTED state).
    """

    def _store_result(
        self,
        task_id: str,
        result: Any,
        state: str,
        traceback: Any = None,
        request: Any = None,
        **kwargs: Any,
    ) -> Any:
        if state == states.SUCCESS:
            # Not reached for job tasks (mark_as_done stores nothing); kept as Celery does it.
            return super()._store_result(task_id, result, state, traceback, request, **kwargs)
        meta = self._get_result_meta(result=result, state=state, traceback=traceback, request=request)
        meta["task_id"] = bytes_to_str(task_id)
        try:
            self._set_with_state(self.get_key_for_task(task_id), self.encode(meta), state)
        except BackendStoreError as exc:
            raise BackendStoreError(str(exc), state=state, task_id=task_id) from exc
        return result


# Refusals that end by themselves: the message is kept and tried again later instead of being
# consumed, so the job runs without anyone acting. Every other refusal means someone else has it.
RETRIED_REFUSALS: Final = PASSING_REFUSALS


def retry_delay(retries: int) -> float:
    """Back off while a refusal lasts (capped at 30 s, with jitter)."""
    return float(min(30.0, 1.0 * 2 ** min(retries, 5)) * random.uniform(0.5, 1.0))


def register_tasks(app: Celery, settings: Settings) -> None:
    """One Celery task per automation task name: any automation may be moved to any queue."""
    from worker_automation.catalog.registry import AUTOMATION_REGISTRY

    def run_job(task: Task, job_id: int) -> dict[str, Any]:
        state = _process_state(settings)
        task_id = task.request.id
        try:
            claim = state.run(state.pipeline.claim_settled(int(job_id), task_id))
        except Stopped:
            # Shutting down while the API did not answer the claim: the message goes back to
            # the queue, unacknowledged, for whichever worker comes next.
            log.warning("job %s: shutting down before the API answered its claim; task handed back", job_id)
            raise Reject("shutdown before the claim was answered", requeue=True) from None
        except SoftTimeLimitExceeded:
            # The time limit counts from the task's start: waiting for the API is no run.
            log.warning(
                "job %s: time limit reached before the API answered its claim; task handed back", job_id
            )
            raise Reject("time limit before the claim was answered", requeue=True) from None
        if not claim.claimed or claim.job is None:
            if claim.reason in RETRIED_REFUSALS:
                # The job stays AGENDADO; try again later without anyone acting.
                raise task.retry(countdown=retry_delay(task.request.retries or 0), max_retries=None)
            return {"outcome": Outcome.REFUSED.value, "reason": claim.reason}
        try:
            result = state.run(state.pipeline.execute(claim.job))
        except SoftTimeLimitExceeded:
            # Celery's soft limit (the automation's timeout_seconds): the run was stopped; its
            # hard limit kills this process should reporting it outlast the grace.
            seconds = _soft_limit(task)
            result = state.run(
                state.pipeline.time_limit_passed(int(job_id), seconds, claim.job.get("task_id"))
            )
            _wait_for_stopped_threads(state, job_id)
        return {"outcome": result.outcome.value, "reason": result.reason}

    backend = PoolTaskBackend(app=app, url=settings.redis_url)
    for automation in AUTOMATION_REGISTRY.values():
        options: dict[str, Any] = {"bind": True, "acks_late": True, "max_retries": None, "backend": backend}
        # The task's own time limits: those of a message sent without them (this worker sending a
        # task again, a message from before the limit) and of the messages it sends.
        hard, soft = celery_time_limits(automation.task_name)
        if soft is not None:
            options.update(time_limit=hard, soft_time_limit=soft)
        app.task(name=automation.task_name, **options)(run_job)
    worker_process_shutdown.connect(_settle_before_exit, weak=False)

    supervisor = os.getpid()

    @worker_process_init.connect(weak=False)  # type: ignore[untyped-decorator]
    def _on_process_start(**_kw: Any) -> None:
        if os.getpid() != supervisor:  # a pool process, not the worker itself (solo pool)
            # Killed with its Celery worker, never left running a job someone else takes over.
            # Celery's own initializer asks for this too; this also ends a process whose worker
            # ended before the request took effect.
            exit_with_parent(supervisor)
        state = _process_state(settings)
        signal.signal(STOP_SIGNAL, lambda _sig, _frame: state.stop())
        # In the background: a pool process must come up at once, whether the API answers or not.
        recovered = asyncio.run_coroutine_threadsafe(state.pipeline.recover_left_behind(), state.loop)
        recovered.add_done_callback(_log_failure)


def _wait_for_stopped_threads(state: _ProcessState, job_id: int) -> None:
    """A sync automation's thread cannot be interrupted: this process takes no other task while it
    runs, and Celery's hard time limit kills the process should it outlast the grace."""
    if not state.pipeline.automations_in_threads():
        return
    log.warning(
        "job %s: its automation still runs in a thread; waiting for it or the hard time limit", job_id
    )
    while state.pipeline.automations_in_threads():
        time.sleep(THREAD_POLL_SECONDS)


def _soft_limit(task: Task) -> float:
    """The soft time limit the running task was given (its message's, else its automation's)."""
    limits = task.request.timelimit or (None, None)
    soft = limits[1] if len(limits) > 1 else None
    if soft is None:
        soft = celery_time_limits(task.name)[1]
    return float(soft or 0.0)


def _log_failure(done: Future[Any]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.error("reports and jobs left behind not sent: %s", done.exception())


def _report_failed(
    settings: Settings, job_ids: list[Any], message: str, exc_type: str
) -> tuple[list[Any], list[Any]]:
    """Report ``job_ids`` failed from the worker's main process (it has no event loop); see
    :func:`_report_from_main`."""
    body = {"error": message, "exc_type": exc_type}
    return _report_from_main(settings, [(job_id, "fail", body) for job_id in job_ids], exc_type)


def _report_from_main(
    settings: Settings, reports: list[tuple[Any, str, dict[str, Any]]], what: str
) -> tuple[list[Any], list[Any]]:
    """Send each ``(job id, route, body)`` to ``/api/v1/jobs/{id}/{route}`` over one connection;
    a job no longer this machine's answers 409 and is left as it is. Returns the jobs the API
    answered for (below 500), and those that were not claimed yet (the process died before its
    claim): they are still AGENDADO. Called from the worker's main process or its threads, which
    run no event loop of their own: the workers' one HTTP client runs in a loop made for it."""
    return asyncio.run(_send_from_main(settings, reports, what))


async def _send_from_main(
    settings: Settings, reports: list[tuple[Any, str, dict[str, Any]]], what: str
) -> tuple[list[Any], list[Any]]:
    headers = {"X-Worker-Api-Key": settings.worker_api_key or ""}
    answered: list[Any] = []
    unclaimed: list[Any] = []
    http = HttpClient(settings.api_url, headers, timeout=MAIN_REPORT_TIMEOUT_SECONDS)
    try:
        for job_id, route, body in reports:
            try:
                answer = await http.request("POST", f"/api/v1/jobs/{job_id}/{route}", json_body=body)
            except (ApiUnreachable, ApiTimeout) as exc:
                log.error("job %s: %s not reported: %s", job_id, what, exc)
                continue
            log.warning("job %s reported (%s): %s", job_id, what, answer.status_code)
            if answer.status_code < 500:
                answered.append(job_id)
            if still_unclaimed(answer):
                unclaimed.append(job_id)
    finally:
        await http.close()
    return answered, unclaimed


def report_lost(task: Task, task_id: str, job_id: Any, settings: Settings) -> None:
    """The pool process holding ``job_id``'s task died: report its run lost if it ran (the API
    ends it FALHA, or queues it again when its automation is safe to run again), or, when it had
    not been claimed yet, queue its task again (its message was consumed with the process)."""
    body = {"fault": WORKER_LOST, "task_id": task_id}
    answered, unclaimed = _report_from_main(settings, [(job_id, "lost", body)], WORKER_LOST)
    if unclaimed:
        log.warning("job %s was not claimed yet: its task is queued again", job_id)
        task.apply_async(args=[job_id], task_id=task_id)
    if answered:
        # What the dead process wrote in the held-jobs ledger is reported now; without an answer
        # it stays, for the next worker process of this machine that starts after this one.
        drop_left_behind(settings.worker_api_key or "", int(job_id))


def _fail_running_after_grace(settings: Settings) -> None:
    """After the grace period, report what still runs as failed, then stop hard."""
    grace = settings.shutdown_grace_seconds
    stop = threading.Event()

    def watchdog() -> None:
        if stop.wait(grace):
            return
        running = [r.args[0] for r in list(worker_state.active_requests) if r.args]
        log.warning("grace period over: %d job(s) still running are reported as failed", len(running))
        _report_failed(settings, running, SHUTDOWN_MESSAGE, "WorkerShutdown")
        os.kill(os.getpid(), signal.SIGQUIT)

    threading.Thread(target=watchdog, name="shutdown-grace", daemon=True).start()


def _report_lost_jobs(settings: Settings) -> None:
    """Fail the job of a pool process that died while running it (the main process sees it as
    ``WorkerLostError``); left alone, the row would stay EXECUTANDO with nobody running it, or
    AGENDADO with no task to run it when the process died before claiming it."""

    @task_failure.connect(weak=False)  # type: ignore[untyped-decorator]
    def _on_failure(
        sender: Task | None = None,
        task_id: str | None = None,
        exception: BaseException | None = None,
        args: Any = None,
        **_kw: Any,
    ) -> None:
        if isinstance(exception, WorkerLostError) and args and sender is not None and task_id:
            report_lost(sender, task_id, args[0], settings)


def _stop_pool_processes(pool: Any) -> None:
    """Tell the pool processes the worker is shutting down (see ``STOP_SIGNAL``)."""
    try:
        pids = list(pool.info.get("processes") or []) if pool is not None else []
    except Exception as exc:  # no pool processes (on demand, none started) or already closing
        log.debug("no pool processes to tell about the shutdown: %s", exc)
        return
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, STOP_SIGNAL)


def build_pool_app(settings: Settings) -> Celery:
    if not settings.redis_url:
        raise SystemExit("worker: WA_REDIS_URL is required (the broker the API sends tasks to)")
    app = make_celery(settings, settings.redis_url)
    register_tasks(app, settings)
    return app


def run_pool_worker(settings: Settings, *, queue: str, concurrency: int | None, name: str | None) -> int:
    """``worker-automation worker -Q QUEUE``: a Celery prefork worker for one queue."""
    if queue not in settings.queues:
        raise SystemExit(f"worker: unknown queue {queue!r} (configured: {', '.join(settings.queues)})")
    if not settings.worker_api_key:
        raise SystemExit("worker: WA_WORKER_API_KEY is required (machines register --queue QUEUE)")
    if settings.exit_with_parent is not None:
        # Started by an embedded serve: ends with it (its pool processes end with this one).
        exit_with_parent(settings.exit_with_parent)
    # Pool processes inherit this until they set their own handler: the stop signal can never
    # kill one that is still starting.
    signal.signal(STOP_SIGNAL, signal.SIG_IGN)
    app = build_pool_app(settings)
    # The runs whose ends this machine keeps unanswered are part of what the worker tells the
    # reconciler (its tasks have returned, so inspect's ``active`` shows them nowhere).
    outbox = machine_directory("outbox", settings.worker_api_key)
    register_command(lambda: kept_in(outbox))
    workers = concurrency or settings.queues[queue]
    if settings.pool_on_demand:
        OnDemandAutoscaler.outbox = outbox
        app.conf[AUTOSCALER_SETTING] = AUTOSCALER_PATH
    _report_lost_jobs(settings)
    quiet_celery_logging(settings.log_format)
    pool_of: dict[str, Any] = {}

    @worker_ready.connect(weak=False)  # type: ignore[untyped-decorator]
    def _on_ready(sender: Any = None, **_kw: Any) -> None:
        pool_of["pool"] = getattr(sender, "pool", None)

    @worker_shutting_down.connect(weak=False)  # type: ignore[untyped-decorator]
    def _on_shutdown(sig: str = "", how: str = "", exitcode: int = 0, **_kw: Any) -> None:
        pool_of["shutdown asked"] = True
        _stop_pool_processes(pool_of.get("pool"))
        if how == "Warm":
            _fail_running_after_grace(settings)

    node = name or f"{queue}-{os.getpid()}@{socket.gethostname()}"
    argv = [
        # No banner and task list: "ready" says the worker is up.
        "--quiet",
        "worker",
        "-Q",
        queue,
        *(["--autoscale", f"{workers},0"] if settings.pool_on_demand else ["-c", str(workers)]),
        "-P",
        "prefork",
        "-n",
        node,
        *(["-E"] if settings.task_events else []),
        "--without-mingle",
        "--without-gossip",
        # Heartbeats are worker events for a monitor (Flower): sent only with task events on.
        *([] if settings.task_events else ["--without-heartbeat"]),
        "-l",
        "INFO",
    ]

    @worker_init.connect(weak=False)  # type: ignore[untyped-decorator]
    def _on_init(sender: Any = None, **_kw: Any) -> None:
        pool_of["worker"] = sender

    started = time.monotonic()
    app.worker_main(argv=argv)
    # Celery's command drops the worker's exit code: it is read off the worker itself.
    exit_code = int(getattr(pool_of.get("worker"), "exitcode", None) or 0)
    if exit_code != 0 and not pool_of.get("shutdown asked"):
        start_again(time.monotonic() - started, exit_code)
    return exit_code
