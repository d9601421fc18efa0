"""Worker processes end with the process that started them, however it ends (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")

CHILD = (
    "import os, sys, time; from worker_automation.worker.lifetime import exit_with_parent; "
    "print(os.getpid(), exit_with_parent(int(sys.argv[1])), flush=True); time.sleep(60)"
)
# A parent that starts the child above and waits; the test kills the parent with SIGKILL.
PARENT = (
    "import os, subprocess, sys, time; "
    f"child = subprocess.Popen([sys.executable, '-c', {CHILD!r}, str(os.getpid())], stdout=sys.stdout); "
    "time.sleep(60)"
)


def gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_a_process_ends_when_its_parent_is_killed() -> None:
    with subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True) as parent:
        try:
            assert parent.stdout is not None
            pid, armed = parent.stdout.readline().split()
            assert armed == "True"
            assert not gone(int(pid), 0.2)
            parent.send_signal(signal.SIGKILL)
            parent.wait(10)
            assert gone(int(pid), 5.0), "the child outlived its parent"
        finally:
            parent.kill()
            parent.wait(10)


def test_a_process_whose_parent_already_ended_ends_at_once() -> None:
    # The expected parent is not this process's parent: it ended before the request took effect.
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(os.getpid() + 1_000_000)], capture_output=True, timeout=30
    )
    assert child.returncode == -signal.SIGKILL
