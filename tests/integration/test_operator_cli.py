"""The operator commands against a running stack (PostgreSQL, Redis, serve): jobs, queues,
schedules, prune, keys, automations; and every option of them has a help line."""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

import pytest

from tests.integration.harness import Stack, cli_command
from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.cli import build_parser

OPERATOR_COMMANDS = ("jobs", "queues", "schedules", "prune", "automations")


def _cli(stack: Stack, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*cli_command(), *args], env=stack.env, cwd=stack.workdir, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode == 0) == ok, (args, done.returncode, done.stdout, done.stderr)
    return done


def test_operator_commands(stack: Stack) -> None:
    key = stack.operator_headers["X-API-Key"]
    keys = _cli(stack, "keys", "list").stdout
    assert key[:10] in keys and key not in keys and "administrador" in keys

    assert _cli(stack, "queues", "pause", "scan").stdout.strip() == "queue scan: paused"
    first = stack.dispatch("demo.echo")
    second = stack.dispatch("demo.echo")
    listed = _cli(stack, "jobs", "list", "--status", "AGENDADO", "--queue", "scan").stdout
    assert f"{second:>8} AGENDADO" in listed and "2 job(s)" in listed

    assert "CANCELADO" in _cli(stack, "jobs", "cancel", str(first)).stdout
    bulk = _cli(stack, "jobs", "cancel", "--status", "AGENDADO", "--automation", "demo.echo").stdout
    assert bulk.splitlines() == ["matched 1, changed 1", str(second)]
    retried = _cli(stack, "jobs", "retry", "--status", "CANCELADO", "--limit", "5").stdout
    assert retried.splitlines()[0] == "matched 2, changed 2"
    shown = _cli(stack, "jobs", "show", str(first)).stdout
    assert '"retry_count": 1' in shown and "attempts: 0" in shown
    neither = _cli(stack, "jobs", "retry", ok=False).stderr
    assert "give a job id, or list filters" in neither and "not both" not in neither
    assert "not both" in _cli(stack, "jobs", "retry", str(first), "--status", "FALHA", ok=False).stderr
    far = _cli(stack, "jobs", "list", "--created-from", "9999-12-31T23:00:00", ok=False).stderr
    assert "field --created-from" in far and "Traceback" not in far
    assert "field status" in _cli(stack, "jobs", "list", "--status", "NOPE", ok=False).stderr

    added = _cli(stack, "schedules", "add", "--automation", "demo.echo", "--cron", "0 6 * * *").stdout
    schedule_id = added.splitlines()[-1]
    assert "06:00:00-03:00" in added
    assert "'0 6 * * *'" in _cli(stack, "schedules", "list").stdout
    bad = _cli(stack, "schedules", "add", "--automation", "demo.echo", "--cron", "nope", ok=False)
    assert "field cron" in bad.stderr
    _cli(stack, "schedules", "rm", schedule_id)
    assert _cli(stack, "schedules", "list").stdout.strip() == ""

    _cli(stack, "jobs", "cancel", "--status", "AGENDADO")
    dry = _cli(stack, "prune", "--older-than-days", "0", "--dry-run")
    assert dry.stdout.strip() == "2 finished job(s) older than 0 day(s) would be deleted (dry run: none was)"
    assert "counting" in dry.stderr and "deleted so far" not in dry.stderr
    assert "2 job(s)" in _cli(stack, "jobs", "list", "--status", "CANCELADO").stdout
    refused = _cli(stack, "prune", "--older-than-days", "-1", ok=False).stderr
    assert "older_than_days" in refused and "deleting" not in refused
    pruned = _cli(stack, "prune", "--older-than-days", "0")
    assert pruned.stdout.strip() == "2 finished job(s) older than 0 day(s) deleted"
    assert "deleted so far: 2" in pruned.stderr
    assert _cli(stack, "queues", "resume", "scan").stdout.strip() == "queue scan: running"

    # The catalogue as it stands: the demos run here, the portals' automations need their plugins.
    table = {line.split()[0]: line.split() for line in _cli(stack, "automations").stdout.splitlines()}
    assert table["KEY"][:4] == ["KEY", "QUEUE", "STATE", "LIMIT"]
    assert table["demo.sleep"][1:3] == ["scan", "enabled"] and table["demo.sleep"][6] == "yes"
    assert table["cnd_federal"][6] == "no"
    catalogue: dict[str, Any] = {a["key"]: a for a in json.loads(_cli(stack, "automations", "--json").stdout)}
    assert set(catalogue) == set(AUTOMATION_REGISTRY)
    sleep = catalogue["demo.sleep"]
    assert sleep["installedHere"] and sleep["context"][0]["name"] == "seconds"


def test_every_operator_option_has_a_help_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every option as ``add_argument`` returns it, with the command it belongs to (its parser's
    # prog): argparse has no public way to list a built parser's subcommands and options.
    added: list[tuple[str, argparse.Action]] = []
    add_argument = argparse.ArgumentParser.add_argument

    def recording(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> argparse.Action:
        action = add_argument(self, *args, **kwargs)
        added.append((self.prog, action))
        return action

    monkeypatch.setattr(argparse.ArgumentParser, "add_argument", recording)
    parser = build_parser()
    checked = 0
    for prog, action in added:
        command = prog.split()[1:]
        # Of ``keys`` only ``list`` is an operator command (create and revoke are older).
        operator = command[:1] != ["keys"] and command[:1] and command[0] in OPERATOR_COMMANDS
        if not (operator or command[:2] == ["keys", "list"]) or "-h" in action.option_strings:
            continue
        assert action.help, f"{' '.join(command)} {action.dest} has no help line"
        checked += 1
    assert checked >= 25
    assert parser.parse_args(["prune", "--older-than-days", "3"]).older_than_days == 3
