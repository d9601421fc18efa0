"""Completions sent but not yet answered, kept on disk until the API answers them.

A pool process reports a job's completion without waiting for the answer (``JobPipeline``), so
a process killed between the request and its answer could take the report with it: the API
drops a request whose client is gone before it was read. Each completion is therefore written
here before it is sent and removed once answered; a process of the same machine starting later
sends again whatever a dead process left behind. Sending one twice is harmless: the API answers
the second with a conflict (the job is no longer running), and nothing changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class Outbox:
    """A directory of unanswered completions, one file per job, named ``<pid>-<job id>.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    @classmethod
    def for_machine(cls, api_key: str) -> Outbox:
        """The outbox of the machine with ``api_key``, under the system's temporary directory."""
        digest = hashlib.sha256(api_key.encode()).hexdigest()[:16]
        return cls(Path(tempfile.gettempdir()) / "worker-automation" / f"outbox-{digest}")

    def hold(self, job_id: int, result: Any) -> Entry:
        """Keep the completion of ``job_id`` until :meth:`release` (no fsync: it guards against a
        process dying, not the machine)."""
        path = self.directory / f"{os.getpid()}-{job_id}.json"
        path.write_text(json.dumps({"job_id": job_id, "result": result}))
        return Entry(path, job_id, result)

    def release(self, entry: Entry) -> None:
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()

    def left_by_dead_processes(self) -> Iterator[Entry]:
        """Completions whose process ended before they were answered."""
        for path in sorted(self.directory.glob("*-*.json")):
            pid, _, _ = path.stem.partition("-")
            if not pid.isdigit() or _alive(int(pid)):
                continue
            # Taken over under this process's name: a process starting alongside skips it, and
            # should this one die too, the next one finds it again.
            mine = self.directory / f"{os.getpid()}-{path.name.partition('-')[2]}"
            try:
                path.rename(mine)
                stored = json.loads(mine.read_text())
                yield Entry(mine, int(stored["job_id"]), stored.get("result"))
            except FileNotFoundError:  # another process took it first
                continue
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("unreadable completion %s dropped: %s", path.name, exc)
                with contextlib.suppress(FileNotFoundError):
                    mine.unlink()
