"""compose.yaml and the Dockerfile describe the deployment the code supports: PostgreSQL, Redis,
the API and one worker service per configured queue, with commands the CLI really accepts."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from worker_automation.cli import build_parser
from worker_automation.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = compose.get("services")
    assert isinstance(found, dict) and found
    return found


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command")
    if command is None:
        return []
    if isinstance(command, str):
        return shlex.split(command)
    assert isinstance(command, list)
    return [str(part) for part in command]


def cli_args(command: list[str]) -> list[str] | None:
    """The arguments after ``worker-automation`` (or ``python -m worker_automation.cli``)."""
    if command[:1] == ["worker-automation"]:
        return command[1:]
    if len(command) >= 3 and command[1:3] == ["-m", "worker_automation.cli"]:
        return command[3:]
    return None


def parses(args: list[str]) -> Any:
    """Parse with the real parser; a usage error is a test failure, not a SystemExit."""
    try:
        return build_parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"worker-automation {' '.join(args)} is not a valid command (exit {exc.code})")


def worker_services(services: dict[str, dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    """queue -> (service name, parsed ``worker`` arguments)."""
    found: dict[str, tuple[str, Any]] = {}
    for name, service in services.items():
        args = cli_args(command_of(service))
        if args and args[0] == "worker":
            parsed = parses(args)
            assert parsed.queue not in found, f"two worker services for queue {parsed.queue}"
            found[parsed.queue] = (name, parsed)
    return found


def test_infrastructure_and_api_services(services: dict[str, dict[str, Any]]) -> None:
    assert {"postgres", "redis", "api"} <= set(services)
    assert str(services["postgres"]["image"]).startswith("postgres")
    assert str(services["redis"]["image"]).startswith("redis")
    api_args = cli_args(command_of(services["api"]))
    assert api_args is not None and api_args[0] == "serve"
    parsed = parses(api_args)
    # Reachable from the other containers, not only from inside its own.
    assert parsed.host == "0.0.0.0"


def test_one_worker_service_per_configured_queue_with_its_count(services: dict[str, dict[str, Any]]) -> None:
    configured = Settings().queues
    workers = worker_services(services)
    assert set(workers) == set(configured)
    for queue, (name, parsed) in workers.items():
        assert parsed.concurrency == configured[queue], f"{name}: -c {parsed.concurrency}"


def test_every_cli_command_parses(services: dict[str, dict[str, Any]]) -> None:
    commands = [args for s in services.values() if (args := cli_args(command_of(s))) is not None]
    assert len(commands) >= 1 + len(Settings().queues)
    for args in commands:
        parses(args)


def test_services_talk_to_each_other(services: dict[str, dict[str, Any]]) -> None:
    api_env = services["api"].get("environment") or {}
    assert "postgres" in str(api_env.get("WA_DATABASE_URL", ""))
    assert "redis" in str(api_env.get("WA_REDIS_URL", ""))
    keys = []
    for name, _parsed in worker_services(services).values():
        env = services[name].get("environment") or {}
        key = env.get("WA_WORKER_API_KEY") or env.get("WA_WORKER_API_KEY_FILE")
        assert key, f"{name} has no machine key"
        assert str(env.get("WA_API_URL", "")).startswith("http://api"), name
        assert "redis" in str(env.get("WA_REDIS_URL", "")), name
        # Pool workers claim through the API: they are never given database credentials.
        assert "WA_DATABASE_URL" not in env, name
        keys.append(str(key))
    # One machine per queue: each worker service has a key of its own.
    assert len(set(keys)) == len(keys)


def test_health_checks(services: dict[str, dict[str, Any]]) -> None:
    for name in ("postgres", "redis", "api"):
        check = services[name].get("healthcheck")
        assert check and check.get("test"), f"{name} has no health check"
    api_check = " ".join(str(part) for part in services["api"]["healthcheck"]["test"])
    assert "/readyz" in api_check or "/healthz" in api_check
    # Nothing starts before what it needs is healthy.
    for name, service in services.items():
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if isinstance(condition, dict) and condition.get("condition") == "service_healthy":
                assert services[dependency].get("healthcheck"), f"{name} waits on {dependency}'s health"
    for queue, (name, _parsed) in worker_services(services).items():
        depends = services[name].get("depends_on") or {}
        assert "api" in depends, f"worker for {queue} does not wait for the API"
        assert depends.get("bootstrap", {}).get("condition") == "service_completed_successfully", name
    assert services["api"]["depends_on"]["bootstrap"]["condition"] == "service_completed_successfully"


# ``${POSTGRES_PASSWORD:?message}``: compose refuses to start without it, and says why.
REQUIRED_SECRET = re.compile(r"\$\{POSTGRES_PASSWORD:\?[^}]+\}")


def test_no_secret_is_written_in_compose(services: dict[str, dict[str, Any]]) -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    # The only variable is the password, and compose needs it set (in .env) to start at all.
    assert re.findall(r"\$\{[^}]*\}", text) == REQUIRED_SECRET.findall(text)
    assert REQUIRED_SECRET.fullmatch(str(services["postgres"]["environment"]["POSTGRES_PASSWORD"]))
    url = str(services["api"]["environment"]["WA_DATABASE_URL"])
    password = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert REQUIRED_SECRET.fullmatch(password), url


def test_the_readme_shows_how_to_make_the_env_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "POSTGRES_PASSWORD=" in readme and "> .env" in readme
    assert ".env" in (ROOT / ".gitignore").read_text(encoding="utf-8").split()


def test_images_are_pinned_to_exact_versions(services: dict[str, dict[str, Any]]) -> None:
    exact = re.compile(r"[a-z0-9/._-]+:\d+\.\d+(\.\d+)?(-[a-z0-9.]+)*")
    for name in ("postgres", "redis"):
        assert exact.fullmatch(str(services[name]["image"])), f"{name}: {services[name]['image']}"
    base = re.search(r"^FROM\s+(\S+)", DOCKERFILE.read_text(encoding="utf-8"), re.MULTILINE)
    assert base and exact.fullmatch(base.group(1)), base


def test_every_service_that_stays_up_has_a_real_health_check(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        check = service.get("healthcheck") or {}
        if name == "bootstrap":  # a one-shot: waited for by its exit, never by its health
            continue
        assert not check.get("disable") and check.get("test"), f"{name} has no health check"
    for queue, (name, _parsed) in worker_services(services).items():
        test = [str(part) for part in services[name]["healthcheck"]["test"]]
        assert test[0] == "CMD"
        args = cli_args(test[1:])
        assert args is not None, f"{name}: {test}"
        parsed = parses(args)
        assert (parsed.command, parsed.queue) == ("ping", queue), f"{name} checks another queue"


def test_one_image_built_once(services: dict[str, dict[str, Any]]) -> None:
    built = [name for name, service in services.items() if "build" in service]
    assert built == ["bootstrap"]
    image = services["bootstrap"]["image"]
    ours = [name for name, service in services.items() if cli_args(command_of(service)) is not None]
    assert {"bootstrap", "api"} <= set(ours)
    for name in ours:
        assert services[name]["image"] == image, name
        if name != "bootstrap":
            assert services[name].get("pull_policy") == "never", name


def test_bootstrap_writes_the_keys_the_workers_read(services: dict[str, dict[str, Any]]) -> None:
    args = cli_args(command_of(services["bootstrap"]))
    assert args is not None
    parsed = parses(args)
    assert parsed.command == "bootstrap"
    volume = next(v for v in services["bootstrap"]["volumes"] if v.endswith(":" + parsed.keys_dir))
    for queue, (name, _parsed) in worker_services(services).items():
        env = services[name]["environment"]
        assert env["WA_WORKER_API_KEY_FILE"] == f"{parsed.keys_dir}/{queue}.key", name
        mounts = [str(v) for v in services[name].get("volumes") or []]
        assert any(m.split(":")[0] == volume.split(":")[0] for m in mounts), f"{name} lacks the keys volume"


def test_redis_persists_its_data(services: dict[str, dict[str, Any]]) -> None:
    command = command_of(services["redis"])
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(str(v).endswith(":/data") for v in services["redis"].get("volumes") or [])


def test_dockerfile_runs_as_a_user_owning_its_data_directory() -> None:
    user = dockerfile_instruction("USER")
    assert user not in ("root", "0")
    workdir = dockerfile_instruction("WORKDIR")
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    assert re.search(rf"chown\s+{user}(:{user})?\s+[^&]*{re.escape(workdir)}", text), (
        "workdir not owned by the user"
    )
    assert workdir in dockerfile_instruction("VOLUME")


def test_grace_period_fits_in_the_stop_timeout(services: dict[str, dict[str, Any]]) -> None:
    for _queue, (name, _parsed) in worker_services(services).items():
        service = services[name]
        grace = float((service.get("environment") or {}).get("WA_SHUTDOWN_GRACE_SECONDS", 120))
        stop = service.get("stop_grace_period")
        assert stop, f"{name}: docker would kill it 10 s after SIGTERM, before the grace period"
        match = re.fullmatch(r"(\d+)s", str(stop))
        assert match and int(match.group(1)) > grace, f"{name}: stop_grace_period {stop} <= {grace}s"


def dockerfile_instruction(name: str) -> str:
    """The last ``NAME`` instruction of the Dockerfile (continuation lines joined)."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    found = [line.split(None, 1)[1] for line in text.splitlines() if line.upper().startswith(name + " ")]
    assert found, f"the Dockerfile has no {name}"
    return found[-1].strip()


def test_dockerfile_cmd_is_a_real_command() -> None:
    raw = dockerfile_instruction("CMD")
    command = json.loads(raw) if raw.startswith("[") else shlex.split(raw)
    args = cli_args(command)
    assert args is not None, f"CMD does not run worker-automation: {command}"
    assert parses(args).command == "serve"


def test_dockerfile_health_check_uses_a_health_route() -> None:
    check = dockerfile_instruction("HEALTHCHECK")
    assert "/healthz" in check or "/readyz" in check
