"""Directories of per-process entries whose owner may die, and who takes over what it left.

Each process writes its entries under its own token and holds an exclusive ``flock`` on
``<token>.lock`` for as long as it lives: an owner is gone when its lock can be taken, which
holds across pid reuse and container restarts (locks end with their process). A process
starting later takes over what a gone owner left by renaming those entries to its own token, so
a process starting alongside skips them, and should it die too, the next one finds them again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)


def machine_directory(kind: str, api_key: str) -> Path:
    """``$TMPDIR/worker-automation/<kind>-<hash of the machine key>``: one per machine and kind."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "worker-automation" / f"{kind}-{digest}"


def owner_gone(lock_path: Path) -> bool:
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


class OwnedDirectory:
    """A directory of ``<owner token>-<job id>.json`` entries, this process owning some of them."""

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

    def path_for(self, job_id: int) -> Path:
        """Where this process keeps its entry about ``job_id``."""
        return self.directory / f"{self.token}-{job_id}.json"

    def has_entry_for(self, job_id: int) -> bool:
        """Whether anyone, alive or gone, keeps an entry about ``job_id`` here."""
        return any(self.directory.glob(f"*-{job_id}.json"))

    def take_over(self, leave: Callable[[Path], bool] | None = None) -> Iterator[tuple[Path, int]]:
        """Entries whose owner is gone, each renamed to this process first: (new path, job id).
        Those for which ``leave(path)`` is true stay where they are."""
        for path in self.left_by_gone_owners():
            if leave is not None and leave(path):
                continue
            job = int(path.stem.rpartition("-")[2])
            mine = self.path_for(job)
            try:
                path.rename(mine)
            except FileNotFoundError:  # another process took it first
                continue
            yield mine, job

    def left_by_gone_owners(self, job_id: int | None = None) -> list[Path]:
        """Entries (about ``job_id``, or all) whose owner is gone; the lock files of the gone
        owners found are removed."""
        gone = {
            lock.stem
            for lock in self.directory.glob("*.lock")
            if lock != self._lock_path and owner_gone(lock)
        }
        found: list[Path] = []
        pattern = "*-*.json" if job_id is None else f"*-{job_id}.json"
        for path in sorted(self.directory.glob(pattern)):
            owner, _, job = path.stem.rpartition("-")
            if owner == self.token or not job.isdigit():
                continue
            if owner not in gone and not owner_gone(self.directory / f"{owner}.lock"):
                continue
            gone.add(owner)
            found.append(path)
        for owner in gone:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{owner}.lock").unlink()
        return found

    def close(self) -> None:
        """Give up this process's lock (its entries, if any, are then someone else's)."""
        if self._lock_fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            self._lock_path.unlink()
        os.close(self._lock_fd)
        self._lock_fd = -1
        with contextlib.suppress(OSError):  # not empty: someone else's entries or locks
            self.directory.rmdir()
