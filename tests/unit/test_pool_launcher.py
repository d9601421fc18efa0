"""One process forks every pool worker of an embedded ``serve``: each gets its own variables and
learns the launcher's pid, the stop signal reaches all of them, and a failure is reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forking needs a POSIX system")

# The launcher runs in a process of its own: it installs signal handlers and forks.
LAUNCHER = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from worker_automation.worker.launcher import run_pool

    out = Path(sys.argv[1])

    def run(argv):
        name, code = argv[0], int(argv[1])
        stopped = []
        signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
        (out / f"{name}.json").write_text(json.dumps(
            {"mine": os.environ["MINE"], "parent": os.environ["WA_EXIT_WITH_PARENT"],
             "ppid": os.getppid(), "json_loaded": "json" in sys.modules}))
        if argv[2:] == ["wait"]:
            while not stopped:
                time.sleep(0.02)
            (out / f"{name}.stopped").write_text("")
        return code

    workers = json.loads(sys.argv[2])
    sys.exit(run_pool(workers, run, ["json"]))
    """
)


def launch(tmp_path: Path, workers: dict[str, dict[str, object]]) -> subprocess.Popen[str]:

    return subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path), json.dumps(workers)], text=True)


def test_each_worker_gets_its_own_variables_and_the_launcher_as_parent(tmp_path: Path) -> None:

    launcher = launch(
        tmp_path,
        {
            "scan": {"argv": ["scan", "0"], "env": {"MINE": "key-scan"}},
            "certidao": {"argv": ["certidao", "0"], "env": {"MINE": "key-certidao"}},
        },
    )
    assert launcher.wait(timeout=30) == 0
    seen = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("scan", "certidao")}
    assert {name: s["mine"] for name, s in seen.items()} == {"scan": "key-scan", "certidao": "key-certidao"}
    for state in seen.values():
        assert state["parent"] == str(launcher.pid) == str(state["ppid"])
        assert state["json_loaded"]


def test_a_worker_that_fails_makes_the_launcher_fail(tmp_path: Path) -> None:
    launcher = launch(
        tmp_path,
        {
            "ok": {"argv": ["ok", "0"], "env": {"MINE": "a"}},
            "bad": {"argv": ["bad", "3"], "env": {"MINE": "b"}},
        },
    )
    assert launcher.wait(timeout=30) == 1


def test_the_stop_signal_reaches_every_worker(tmp_path: Path) -> None:
    launcher = launch(
        tmp_path,
        {
            "one": {"argv": ["one", "0", "wait"], "env": {"MINE": "a"}},
            "two": {"argv": ["two", "0", "wait"], "env": {"MINE": "b"}},
        },
    )
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"{n}.json").exists() for n in ("one", "two")):
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.05)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == 0
    assert (tmp_path / "one.stopped").exists() and (tmp_path / "two.stopped").exists()
