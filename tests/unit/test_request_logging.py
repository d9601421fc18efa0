"""Request ids (taken or made, echoed, on every log line of the request), the JSON log format,
the progress access lines left out, and HTTP latency labelled by route template."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from worker_automation.asgi.request_middleware import RequestObserver
from worker_automation.infra.logs import REQUEST_ID, JsonFormatter, QuietProgress, TextFormatter, log_config

log = logging.getLogger("tests.request_logging")


async def item(request: Request) -> Response:
    log.info("reading item %s", request.path_params["item_id"])
    return PlainTextResponse("ok")


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        log.removeHandler(handler)


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = Starlette(routes=[Route("/items/{item_id}", item)], middleware=[Middleware(RequestObserver)])
    with TestClient(app) as test_client:
        yield test_client


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_given_request_id_is_echoed_and_on_the_log_line(client: TestClient, captured: io.StringIO) -> None:
    answer = client.get("/items/7", headers={"X-Request-ID": "abc-123"})

    assert answer.headers["x-request-id"] == "abc-123"
    (line,) = lines(captured)
    assert line["request_id"] == "abc-123"
    assert line["message"] == "reading item 7"
    assert {"time", "level", "logger"} <= set(line)
    assert line["level"] == "INFO" and line["logger"] == "tests.request_logging"


@pytest.mark.parametrize("sent", ["", "has space", "x" * 65, 'quote"d', "new\nline"])
def test_unusable_request_ids_are_replaced(client: TestClient, captured: io.StringIO, sent: str) -> None:
    headers = {"X-Request-ID": sent} if "\n" not in sent else {}
    answer = client.get("/items/1", headers=headers)

    made = answer.headers["x-request-id"]
    assert made != sent and len(made) == 32
    assert lines(captured)[0]["request_id"] == made


def test_each_request_gets_its_own_id(client: TestClient) -> None:
    first = client.get("/items/1").headers["x-request-id"]
    assert client.get("/items/1").headers["x-request-id"] != first


def test_text_format_names_the_request_id() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    assert TextFormatter().format(record).endswith("x: hello")
    token = REQUEST_ID.set("r-1")
    try:
        assert TextFormatter().format(record).endswith("x: hello request_id=r-1")
    finally:
        REQUEST_ID.reset(token)


def count(route: str, status: str) -> float:
    value = REGISTRY.get_sample_value(
        "wa_http_request_duration_seconds_count", {"route": route, "method": "GET", "status": status}
    )
    return value or 0.0


def test_latency_is_labelled_by_route_template_never_the_raw_path(client: TestClient) -> None:
    before, unmatched = count("/items/{item_id}", "200"), count("unmatched", "404")

    client.get("/items/41")
    client.get("/items/42")
    client.get("/nothing/here/43")

    assert count("/items/{item_id}", "200") == before + 2
    assert count("unmatched", "404") == unmatched + 1
    exposed = [s for m in REGISTRY.collect() for s in m.samples if s.name.startswith("wa_http")]
    assert not [s for s in exposed if "43" in s.labels.get("route", "")]


def progress_record(method: str, path: str) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4:5", method, path, "1.1", 200),
        None,
    )


def test_access_lines_of_progress_reports_are_left_out() -> None:
    quiet = QuietProgress()
    assert not quiet.filter(progress_record("POST", "/api/v1/jobs/12/progress"))
    assert quiet.filter(progress_record("POST", "/api/v1/jobs/12/complete"))
    assert quiet.filter(progress_record("GET", "/api/v1/worker-automation/12"))
    config = log_config("json")
    assert config["loggers"]["uvicorn.access"]["filters"] == ["quiet_progress"]
    assert config["formatters"]["app"]["()"].endswith("JsonFormatter")


def test_celery_signal_messages_become_one_log_line() -> None:
    from worker_automation.worker.celery_logging import signal_line

    assert signal_line("worker: Hitting Ctrl+C again will terminate all running tasks!", "text") is None
    assert signal_line("\n", "json") is None
    entry = json.loads(signal_line("\nworker: Warm shutdown (MainProcess)\n", "json") or "")
    assert entry["message"] == "worker: Warm shutdown (MainProcess)"
    assert {"time", "level", "logger", "request_id"} <= set(entry)
    assert (signal_line("worker: Cold shutdown", "text") or "").endswith(
        "INFO celery.apps.worker: worker: Cold shutdown"
    )


def test_celery_success_line_becomes_the_jobs_outcome_line(caplog: pytest.LogCaptureFixture) -> None:
    from celery.app.trace import LOG_SUCCESS

    from worker_automation.worker.celery_logging import JOBS_LOGGER, JobOutcomeLine

    def record(result: str, name: str = "worker_automation.automations.demo.fail") -> logging.LogRecord:
        values = {
            "id": "t1",
            "name": name,
            "return_value": result,
            "runtime": 0.25,
            "args": "(12,)",
            "kwargs": "",
        }
        return logging.LogRecord("celery.app.trace", logging.INFO, __file__, 1, LOG_SUCCESS, (values,), None)

    line = JobOutcomeLine()
    with caplog.at_level(logging.INFO, logger=JOBS_LOGGER):
        assert not line.filter(record("{'outcome': 'refused', 'reason': 'already_claimed'}"))
        assert not line.filter(record("{'outcome': 'failed', 'reason': 'senha 1234 recusada'}"))
    # A failure is said once, as a failure, with nothing the job carried.
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "job 12 (demo.fail): failed in 0.250s")
    ]
    other = record("42", name="celery.ping")
    assert line.filter(other) and "succeeded" in other.getMessage()
