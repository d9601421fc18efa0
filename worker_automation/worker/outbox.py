"""Reports of a job's end (its completion or its failure) kept on disk until the API answers.

A pool process reports a job's completion without waiting for the answer (``JobPipeline``), so
a process killed between the request and its answer could take the report with it: the API
drops a request whose client is gone before it was read. And while the API is down no report
is answered at all. Each report is therefore written here before it is sent and removed once
answered; the process sends again what it keeps once the API answers, and a process of the same
machine starting later sends whatever a dead process left behind. Sending one twice is harmless:
the API answers the second with a conflict (the job is no longer running), and nothing changes.

Entries are ``<owner token>-<job id>.json`` files owned as :mod:`worker_automation.worker.owners`
describes.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from worker_automation.worker.owners import OwnedDirectory, machine_directory

log = logging.getLogger(__name__)


class Kind(StrEnum):
    """Which report an entry keeps."""

    COMPLETE = "complete"
    FAIL = "fail"


@dataclass(frozen=True)
class Entry:
    """One report waiting for its answer: a completion (``result``) or a failure (``error``,
    ``exc_type``, ``traceback``) of ``job_id``'s run ``task_id``."""

    path: Path
    job_id: int
    result: Any = None
    task_id: str | None = None
    kind: Kind = Kind.COMPLETE
    error: str | None = None
    exc_type: str | None = None
    traceback: str | None = None

    def as_json(self) -> str:
        body: dict[str, Any] = {"kind": self.kind.value, "job_id": self.job_id, "task_id": self.task_id}
        if self.kind is Kind.COMPLETE:
            body["result"] = self.result
        else:
            body.update(error=self.error, exc_type=self.exc_type, traceback=self.traceback)
        return json.dumps(body)


def _read(path: Path, job_id: int) -> Entry:
    stored = json.loads(path.read_text())
    # Entries written before reports had kinds are completions.
    kind = Kind(stored.get("kind", Kind.COMPLETE.value))
    return Entry(
        path,
        int(stored["job_id"]),
        stored.get("result"),
        stored.get("task_id"),
        kind,
        stored.get("error"),
        stored.get("exc_type"),
        stored.get("traceback"),
    )


class Outbox:
    """A directory of unanswered reports, one file per job: ``<owner token>-<job id>.json``."""

    def __init__(self, directory: Path) -> None:
        self._owned = OwnedDirectory(directory)
        self.directory = directory
        self.token = self._owned.token

    @classmethod
    def for_machine(cls, api_key: str) -> Outbox:
        """The outbox of the machine with ``api_key``, under the system's temporary directory."""
        return cls(machine_directory("outbox", api_key))

    def hold(self, job_id: int, result: Any, task_id: str | None = None) -> Entry:
        """Keep the completion of ``job_id``'s run ``task_id`` until :meth:`release` (no fsync: it
        guards against a process dying, not the machine). OSError when it cannot be written."""
        return self._write(Entry(self._owned.path_for(job_id), job_id, result, task_id))

    def hold_failure(
        self,
        job_id: int,
        error: str,
        exc_type: str | None,
        traceback: str | None,
        task_id: str | None = None,
    ) -> Entry:
        """Keep the failure of ``job_id``'s run until :meth:`release` (as :meth:`hold`)."""
        entry = Entry(
            self._owned.path_for(job_id), job_id, None, task_id, Kind.FAIL, error, exc_type, traceback
        )
        return self._write(entry)

    @staticmethod
    def _write(entry: Entry) -> Entry:
        entry.path.write_text(entry.as_json())
        return entry

    def release(self, entry: Entry) -> None:
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()

    def holds(self, job_id: int) -> bool:
        """Whether this process keeps a report about ``job_id``."""
        return self._owned.path_for(job_id).exists()

    def keeps(self, job_id: int) -> bool:
        """Whether any process, alive or gone, keeps a report about ``job_id`` here."""
        return self._owned.has_entry_for(job_id)

    def left_behind(self) -> Iterator[Entry]:
        """Reports whose owner ended before they were answered, taken over by this process."""
        for path, job_id in self._owned.take_over():
            try:
                yield _read(path, job_id)
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("unreadable report %s dropped: %s", path.name, exc)
                self.release(Entry(path, job_id))

    def close(self) -> None:
        """Give up this process's lock (its entries, if any, are then the next process's)."""
        self._owned.close()


def kept_in(directory: Path) -> list[dict[str, Any]]:
    """The reports kept in ``directory`` by any process, alive or gone, as ``{"job_id",
    "task_id"}`` (read without taking anything over: a live owner still sends its own)."""
    found: list[dict[str, Any]] = []
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*-*.json")):
        job = path.stem.rpartition("-")[2]
        if not job.isdigit():
            continue
        try:
            entry = _read(path, int(job))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # answered and removed meanwhile, or being written
        found.append({"job_id": entry.job_id, "task_id": entry.task_id})
    return found
