"""The command line's parser: help on every option, the package version, bounded numbers."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from worker_automation.cli import build_parser


def parsers(
    parser: argparse.ArgumentParser, name: str = "worker-automation"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{name}: {action.dest}"
        for name, parser in parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def test_description_has_no_markup() -> None:
    description = build_parser().description or ""
    assert description and "``" not in description and "`" not in description


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"worker-automation {version('worker-automation')}"


@pytest.mark.parametrize(
    "argv",
    [
        ["seed-demo", "--jobs", "-5"],
        ["seed-demo", "--jobs", "99999999999"],
        ["seed-demo", "--clientes", "-1"],
        ["seed-demo", "--jobs", "many"],
        ["dispatch", "demo.echo", "--priority", "10"],
        ["worker", "-Q", "scan", "-c", "0"],
    ],
)
def test_numbers_out_of_range_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "error: argument" in capsys.readouterr().err


# What the whole service loads; the parser's own answers need none of it.
HEAVY = ("pydantic", "pydantic_settings", "sqlalchemy", "celery", "kombu", "redis", "strawberry", "starlette")
_LOADED = """
import json, sys
from worker_automation.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {heavy})), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["keys", "create", "--help"], ["dispatch"]])
def test_answers_of_the_parser_load_nothing_heavy(argv: list[str], tmp_path: Path) -> None:
    # A fresh interpreter: this test process has long since loaded everything.
    done = subprocess.run(
        [sys.executable, "-c", _LOADED.format(heavy=set(HEAVY)), *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert loaded == []
    assert done.stdout or "error: " in done.stderr


def test_every_command_names_a_function_that_exists() -> None:
    import importlib

    from worker_automation.cli.parser import Command

    commands = {p.get_default("fn") for _name, p in parsers(build_parser())} - {None}
    assert len(commands) > 20
    for command in commands:
        assert isinstance(command, Command)
        assert callable(
            getattr(importlib.import_module(f"worker_automation.cli.{command.module}"), command.name)
        )
