"""Pool workers of an embedded serve: the API's own code (never a checkout in the cwd), serve's
settings, their wording; and what serve says once ready."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from worker_automation.asgi.serving import KEY_COMMAND, ready_banner
from worker_automation.broker.celery_app import make_celery
from worker_automation.cli.embedded_worker import (
    BROKER_WAIT_SECONDS,
    CONNECTION_LOGGER,
    EMBEDDED_BROKER_LINE,
    EmbeddedBrokerWording,
    before_start,
)
from worker_automation.process.embedded_pool import (
    API_CODE_ROOT,
    WORKER_SETTINGS,
    pool_worker_command,
    pool_worker_env,
)
from worker_automation.settings import Settings


def fake_package(cwd: Path) -> None:
    package = cwd / "worker_automation"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli").mkdir()
    (package / "cli" / "__init__.py").write_text("print('FAKE CHECKOUT')\n")
    (package / "cli" / "embedded_worker.py").write_text("print('FAKE CHECKOUT')\n")


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


def test_pool_workers_get_the_settings_they_read_from_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WA_DATABASE_URL", "postgresql://secret@db/wa")
    monkeypatch.setenv("WA_API_KEY", "wak_operator")
    monkeypatch.delenv("WA_LOG_FORMAT", raising=False)
    # Given to serve as an object (not through the environment), as tests and embedders do.
    settings = Settings(
        log_format="json", max_result_bytes=4096, task_events=True, queues={"scan": 3}, timezone="UTC"
    )

    env = pool_worker_env(settings, WA_WORKER_API_KEY="wmk_x")

    assert env["WA_LOG_FORMAT"] == "json"
    assert env["WA_MAX_RESULT_BYTES"] == "4096"
    assert env["WA_WORKER_API_KEY"] == "wmk_x"
    # A machine never gets database credentials nor an operator's key.
    assert "WA_DATABASE_URL" not in env and "WA_API_KEY" not in env
    # What the worker's own Settings reads back is what serve had.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("WA_DATABASE_URL")
    monkeypatch.delenv("WA_API_KEY")
    seen = Settings()
    for name in WORKER_SETTINGS:
        assert getattr(seen, name) == getattr(settings, name), name


def test_the_connection_line_names_the_embedded_broker() -> None:
    record = logging.LogRecord(
        CONNECTION_LOGGER, logging.INFO, __file__, 1, "Connected to %s", ("redis://127.0.0.1:4242/0",), None
    )
    assert EmbeddedBrokerWording().filter(record)
    assert record.getMessage() == EMBEDDED_BROKER_LINE
    other = logging.LogRecord(CONNECTION_LOGGER, logging.INFO, __file__, 1, "consumer: %s", ("x",), None)
    assert EmbeddedBrokerWording().filter(other)
    assert other.getMessage() == "consumer: x"


def test_the_ready_banner_says_where_things_are_and_how_to_get_a_key() -> None:
    banner = ready_banner("http://127.0.0.1:8000/", key_exists=False)
    assert "console:  http://127.0.0.1:8000/console/" in banner
    assert "GraphiQL: http://127.0.0.1:8000/graphql" in banner
    assert "API:      http://127.0.0.1:8000/api/v1/worker-automation" in banner
    assert KEY_COMMAND in banner
    assert "--perfil administrador" in KEY_COMMAND
    assert KEY_COMMAND not in ready_banner("http://127.0.0.1:8000", key_exists=True)


def test_an_idle_embedded_worker_asks_its_broker_seldom() -> None:
    app = make_celery(Settings(), "redis://127.0.0.1:1/0")
    frozen = gc.get_freeze_count()
    try:
        before_start(sender=SimpleNamespace(app=app))
        assert gc.get_freeze_count() >= frozen
        with app.connection_for_read() as connection:
            # kombu's blocking pop waits this long before asking again.
            assert connection.transport.brpop_timeout == BROKER_WAIT_SECONDS
    finally:
        gc.unfreeze()
