"""``serve`` options checked before anything starts."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from worker_automation.cli import build_parser, main
from worker_automation.infra import logs


@pytest.fixture(autouse=True)
def _logging_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` sets up the process's logging as the command line does: a handler on the stderr
    of the moment, which pytest closes after the test, and warnings sent through logging. Left
    so, every later test of this process would log into a closed file; these tests check what
    ``serve`` prints before anything starts, not its logging."""
    monkeypatch.setattr(logs, "configure", lambda log_format, *, verbose=False: None)


def test_several_processes_need_postgresql_and_redis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.upper().startswith("WA_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "--workers" in err and "WA_DATABASE_URL" in err and "WA_REDIS_URL" in err
    # Refused before anything was created: no database file, no broker.
    assert list(tmp_path.iterdir()) == []


def test_sqlite_with_redis_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WA_DATABASE_URL", f"sqlite:///{tmp_path / 'jobs.db'}")
    monkeypatch.setenv("WA_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--workers", "3"]) == 2
    assert "WA_DATABASE_URL (PostgreSQL)" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_workers_must_be_a_positive_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--workers", value])
    assert exited.value.code == 2
    assert "--workers" in capsys.readouterr().err


def test_one_process_by_default() -> None:
    assert build_parser().parse_args(["serve"]).workers == 1


def test_an_unreachable_database_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WA_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/nothing_here")
    monkeypatch.setenv("WA_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--workers", "2"]) == 1
    assert "error: the database cannot be prepared" in capsys.readouterr().err


def test_a_bad_trusted_documents_manifest_stops_several_processes_before_they_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "trusted.json"
    manifest.write_text('{"list": "{ nosuchfield }"}', encoding="utf-8")
    # Nothing answers on these ports: the manifest is refused before anything is reached.
    monkeypatch.setenv("WA_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("WA_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("WA_GRAPHQL_TRUSTED_DOCUMENTS", str(manifest))
    assert main(["serve", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: WA_GRAPHQL_TRUSTED_DOCUMENTS") and "'list'" in err
    assert "Traceback" not in err


def test_a_port_in_use_is_a_clear_error_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.upper().startswith("WA_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--host", "127.0.0.1", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "--port" in err and "Traceback" not in err
    # Refused before anything was created: no database file, no broker.
    assert list(tmp_path.iterdir()) == []
