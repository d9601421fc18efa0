"""What an embedded ``serve`` leaves in its working directory for the commands run beside it.

- ``.worker-automation.lock``: held (``flock``) for the life of the one embedded ``serve`` of the
  directory, and naming it (pid, address). A second ``serve`` there would rotate the first one's
  machine keys and share its SQLite file with a second broker, so it refuses to start instead.
  The kernel releases the lock when the process dies, however it dies.
- ``.worker-automation-broker``: the address of that serve's in-memory broker. Commands such as
  ``dispatch`` send through it; with no serve running they never start a broker of their own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

LOCK_NAME: Final = ".worker-automation.lock"
BROKER_NAME: Final = ".worker-automation-broker"


def lock_file(directory: Path | None = None) -> Path:
    return (directory or Path.cwd()) / LOCK_NAME


def broker_state_file(directory: Path | None = None) -> Path:
    """Where an embedded ``serve`` leaves its broker address for commands run beside it."""
    return (directory or Path.cwd()) / BROKER_NAME


class ServeAlreadyRunning(Exception):
    """Another embedded ``serve`` holds this directory."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


@dataclass
class DirectoryLock:
    """The open, locked lock file of the running embedded ``serve`` (kept until it exits)."""

    path: Path
    handle: IO[str]

    @classmethod
    def acquire(cls, url: str, directory: Path | None = None) -> DirectoryLock:
        """Take the directory's lock or raise :class:`ServeAlreadyRunning` naming its holder."""
        path = lock_file(directory)
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _describe(handle.read())
            handle.close()
            raise ServeAlreadyRunning(holder) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "url": url}))
        handle.flush()
        return cls(path, handle)

    def release(self) -> None:
        if self.handle.closed:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        self.handle.close()


def _describe(content: str) -> str:
    try:
        owner = json.loads(content)
        return f"pid {owner['pid']}, {owner['url']}"
    except (ValueError, KeyError, TypeError):
        return "a process whose details could not be read"


def serve_running(directory: Path | None = None) -> bool:
    """True while an embedded ``serve`` holds the directory's lock."""
    path = lock_file(directory)
    if not path.exists():
        return False
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def running_broker_url(directory: Path | None = None) -> str | None:
    """The broker of the embedded ``serve`` running in the directory; None when none runs."""
    state = broker_state_file(directory)
    if not state.exists() or not serve_running(directory):
        return None
    return state.read_text().strip() or None
