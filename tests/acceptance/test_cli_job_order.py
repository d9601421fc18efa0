"""``jobs list --created-from --created-to --order-by`` as an operator types them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.harness import clean_env, cli_command, run_cli


def _ids(lines: str) -> list[int]:
    return [int(line.split()[0]) for line in lines.splitlines() if line.strip()[:1].isdigit()]


def _list(env: dict[str, str], cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli_command(), "jobs", "list", "--per-page", "100", *options],
        env=env,
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_jobs_list_orders_and_ranges(tmp_path: Path) -> None:
    env = clean_env(WA_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'wa.db'}", WA_TIMEZONE="UTC")
    run_cli(["seed-demo", "--jobs", "40", "--clientes", "3"], env, tmp_path)

    by_priority = _list(env, tmp_path, "--order-by", "priority:asc")
    assert by_priority.returncode == 0, by_priority.stderr
    priorities = [
        int(line.split("priority=")[1].split()[0])
        for line in by_priority.stdout.splitlines()
        if "priority=" in line
    ]
    assert len(priorities) == 40 and priorities == sorted(priorities)

    newest = _ids(_list(env, tmp_path).stdout)
    created = {
        int(line.split()[0]): line.split("created=")[1].split()[0]
        for line in _list(env, tmp_path).stdout.splitlines()
        if "created=" in line
    }
    middle = sorted(created.values())[20]
    after = _ids(_list(env, tmp_path, "--created-from", middle).stdout)
    before = _ids(_list(env, tmp_path, "--created-to", middle).stdout)
    assert sorted(after + before) == sorted(newest)
    assert all(created[i] >= middle for i in after) and all(created[i] < middle for i in before)

    refused = _list(env, tmp_path, "--order-by", "size")
    assert refused.returncode != 0 and "--order-by" in refused.stderr
    reversed_range = _list(env, tmp_path, "--created-from", "2026-03-02T10:00", "--created-to", "2026-03-01")
    assert reversed_range.returncode != 0 and "created_from" in reversed_range.stderr
