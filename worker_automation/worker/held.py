"""The jobs a worker process holds, kept on disk so that the next process can tell what it left.

A process that dies while it holds a job (SIGKILL, the OOM killer, a crash of its machine's
supervisor) cannot say so; the API would see the job EXECUTANDO with nobody running it. So each
process writes an entry (job id and task id) here just before it claims a job and removes it once
the job's end is kept in the outbox or answered, or the claim was refused. A process of the same
machine starting later reports the entries of owners that are gone to the API as ``worker_lost``
(``POST /api/v1/jobs/{id}/lost``): the API ends or re-queues the run if that machine still holds
it, and answers a conflict when it does not (the claim never went through, or the run ended).

Entries are ``<owner token>-<job id>.json`` files owned as :mod:`worker_automation.worker.owners`
describes; each also names the supervisor (the Celery main process) of its owner, since that
supervisor reports the jobs of its own pool processes that die (see ``pool.report_lost``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worker_automation.worker.owners import OwnedDirectory, machine_directory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldJob:
    """A job a process claimed (or was claiming) and had not finished reporting."""

    path: Path
    job_id: int
    task_id: str | None = None
    supervisor: int | None = None


class HeldJobs:
    """The ledger of one machine's processes: ``held-<key hash>`` beside their outbox."""

    def __init__(self, directory: Path, supervisor: int | None = None) -> None:
        self._owned = OwnedDirectory(directory)
        self.directory = directory
        self.supervisor = supervisor

    @classmethod
    def for_machine(cls, api_key: str, supervisor: int | None = None) -> HeldJobs:
        return cls(machine_directory("held", api_key), supervisor)

    def hold(self, job_id: int, task_id: str | None) -> HeldJob:
        """Write the entry (OSError when it cannot be written: the caller goes on without it)."""
        path = self._owned.path_for(job_id)
        body = {"job_id": job_id, "task_id": task_id, "supervisor": self.supervisor}
        path.write_text(json.dumps(body))
        return HeldJob(path, job_id, task_id, self.supervisor)

    def release(self, job_id: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._owned.path_for(job_id).unlink()

    def left_behind(self) -> Iterator[HeldJob]:
        """Entries of owners that are gone, taken over by this process. Those of a sibling whose
        supervisor is this process's own parent stay: that supervisor saw it die and reports its
        job (:func:`drop_left_behind`)."""
        parent = os.getppid()

        def siblings(path: Path) -> bool:
            return self.supervisor == parent and _stored_supervisor(path) == parent

        for path, job_id in self._owned.take_over(leave=siblings):
            try:
                stored = json.loads(path.read_text())
                entry = HeldJob(path, int(stored["job_id"]), stored.get("task_id"), stored.get("supervisor"))
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("unreadable held job %s dropped: %s", path.name, exc)
                self.release(job_id)
                continue
            yield entry

    def close(self) -> None:
        """Give up this process's lock (entries still here are then the next process's to report)."""
        self._owned.close()


def _stored_supervisor(path: Path) -> int | None:
    try:
        value = json.loads(path.read_text()).get("supervisor")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def drop_left_behind(api_key: str, job_id: int) -> int:
    """Remove the entries about ``job_id`` whose owners are gone (a supervisor reported the job
    of its pool process that died); how many were removed."""
    directory = machine_directory("held", api_key)
    if not directory.is_dir():
        return 0
    owned = OwnedDirectory(directory)
    try:
        found = owned.left_by_gone_owners(job_id)
        for path in found:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return len(found)
    finally:
        owned.close()
