"""Completions sent but not yet answered, kept on disk until the API answers them.

A pool process reports a job's completion without waiting for the answer (``JobPipeline``), so
a process killed between the request and its answer could take the report with it: the API
drops a request whose client is gone before it was read. Each completion is therefore written
here before it is sent and removed once answered; a process of the same machine starting later
sends again whatever a dead process left behind. Sending one twice is harmless: the API answers
the second with a conflict (the job is no longer running), and nothing changes.

Entries are named after their owner, a token of the process that holds an exclusive ``flock``
on ``<token>.lock`` for as long as it lives: an owner is gone when its lock can be taken, which
holds across pid reuse and container restarts (locks end with their process).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One completion waiting for its answer."""

    path: Path
    job_id: int
    result: Any
    task_id: str | None = None


def _owner_gone(lock_path: Path) -> bool:
    """True when nobody holds the lock at ``lock_path`` (or it is not there any more)."""
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # releases the lock just taken, if any
    return True


class Outbox:
    """A directory of unanswered completions, one file per job: ``<owner token>-<job id>.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.token = f"{os.getpid()}.{uuid.uuid4().hex[:12]}"
        # Held until this process ends (the descriptor is not inherited by programs it starts);
        # locked before it gets its name, so a lock file under a name is always held while its
        # owner lives.
        self._lock_path = directory / f"{self.token}.lock"
        unnamed = directory / f".{self.token}.new"
        self._lock_fd = os.open(unnamed, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        unnamed.rename(self._lock_path)

    @classmethod
    def for_machine(cls, api_key: str) -> Outbox:
        """The outbox of the machine with ``api_key``, under the system's temporary directory."""
        digest = hashlib.sha256(api_key.encode()).hexdigest()[:16]
        return cls(Path(tempfile.gettempdir()) / "worker-automation" / f"outbox-{digest}")

    def hold(self, job_id: int, result: Any, task_id: str | None = None) -> Entry:
        """Keep the completion of ``job_id``'s run ``task_id`` until :meth:`release` (no fsync: it
        guards against a process dying, not the machine). OSError when it cannot be written."""
        path = self.directory / f"{self.token}-{job_id}.json"
        path.write_text(json.dumps({"job_id": job_id, "result": result, "task_id": task_id}))
        return Entry(path, job_id, result, task_id)

    def release(self, entry: Entry) -> None:
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()

    def left_behind(self) -> Iterator[Entry]:
        """Completions whose owner ended before they were answered, taken over by this process
        (renamed to its token: a process starting alongside skips them, and should this one die
        too, the next one finds them again)."""
        gone = {
            lock.stem
            for lock in self.directory.glob("*.lock")
            if lock != self._lock_path and _owner_gone(lock)
        }
        for path in sorted(self.directory.glob("*-*.json")):
            owner, _, job = path.stem.rpartition("-")
            if owner == self.token or not job.isdigit():
                continue
            if owner not in gone and not _owner_gone(self.directory / f"{owner}.lock"):
                continue
            gone.add(owner)
            mine = self.directory / f"{self.token}-{job}.json"
            try:
                path.rename(mine)
                stored = json.loads(mine.read_text())
                yield Entry(mine, int(stored["job_id"]), stored.get("result"), stored.get("task_id"))
            except FileNotFoundError:  # another process took it first
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("unreadable completion %s dropped: %s", path.name, exc)
                self.release(Entry(mine, int(job), None))
        for owner in gone:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{owner}.lock").unlink()

    def close(self) -> None:
        """Give up this process's lock (its entries, if any, are then someone else's to send)."""
        if self._lock_fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            self._lock_path.unlink()
        os.close(self._lock_fd)
        self._lock_fd = -1
        with contextlib.suppress(OSError):  # not empty: someone else's entries or locks
            self.directory.rmdir()
