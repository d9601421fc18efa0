"""Pool workers of an embedded serve import the API's own code, never a checkout in the cwd."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from worker_automation.embedded_pool import API_CODE_ROOT, pool_worker_command


def fake_package(cwd: Path) -> None:
    package = cwd / "worker_automation"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("print('FAKE CHECKOUT')\n")


def run(command: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = API_CODE_ROOT
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr


def test_pool_worker_command_ignores_a_package_in_the_working_directory(tmp_path: Path) -> None:
    fake_package(tmp_path)
    command = pool_worker_command("scan", 1)
    assert command[0] == sys.executable
    # Same interpreter and module, asked for its version instead of starting a worker.
    probe = [*command[: command.index("worker")], "--version"]

    output = run(probe, tmp_path)

    assert "FAKE CHECKOUT" not in output
    assert output.startswith("worker-automation ")
    # Without the flag the folder in the working directory would have won.
    plain = [arg for arg in probe if arg != "-P"]
    assert "FAKE CHECKOUT" in run(plain, tmp_path)
