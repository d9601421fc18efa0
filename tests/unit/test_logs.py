"""With WA_LOG_FORMAT=json a process writes JSON lines only: Python's warnings included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_WARN = """
import logging, warnings
from worker_automation.infra.logs import configure
configure("json")
warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
warnings.warn("something odd")
logging.getLogger("celery.app.trace").info("a library line")
"""


def test_json_logging_turns_warnings_into_json_lines(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", _WARN],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [line["logger"] for line in lines] == ["py.warnings", "py.warnings", "celery.app.trace"]
    assert "deprecated thing" in lines[0]["message"] and lines[0]["level"] == "WARNING"
