"""Log lines: text for people or one JSON object per line (``WA_LOG_FORMAT``), each carrying the
id of the HTTP request it belongs to, and without the lines nobody reads (an access line per
progress report: those are counted in ``/metrics`` instead)."""

from __future__ import annotations

import asyncio
import json
import logging
import logging.config
import re
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Final

# The request being served by the current task (set by the request middleware).
REQUEST_ID: Final[ContextVar[str | None]] = ContextVar("request_id", default=None)
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries whose INFO lines say nothing a user of these commands needs.
QUIET_LOGGERS: Final = ("alembic", "httpx", "httpcore", "mcp", "sse_starlette")
# A worker's progress report: one every few seconds per running job.
_PROGRESS_PATH = re.compile(r"^/api/v1/jobs/[^/]+/progress$")


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, plus ``request_id=...`` on the lines of a request."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = REQUEST_ID.get()
        return f"{line} request_id={request_id}" if request_id else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id, and
    the traceback as ``exc_info`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": REQUEST_ID.get(),
        }
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class QuietProgress(logging.Filter):
    """Drops uvicorn's access line for workers' progress reports."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn.access: (client, method, path, http version, status)
        if isinstance(args, tuple) and len(args) >= 3 and args[1] == "POST":
            return not _PROGRESS_PATH.match(str(args[2]).split("?", 1)[0])
        return True


FORCED_EXIT_MESSAGE: Final = (
    "stopped at once on a second stop signal (Ctrl-C): the rest of the shutdown was skipped; a job "
    "left running is found and resolved when serve starts again"
)


class ForcedExit(logging.Filter):
    """The traceback of the application's lifespan cancelled by a forced exit (a second Ctrl-C)
    becomes one warning saying what that means. uvicorn logs it either as the traceback's text
    (Starlette's ``lifespan.shutdown.failed`` message) or with the exception attached."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.msg if isinstance(record.msg, str) else ""
        cancelled_text = text.startswith("Traceback") and text.rstrip().endswith("CancelledError")
        if cancelled_text or (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError)):
            record.msg, record.args = FORCED_EXIT_MESSAGE, ()
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def log_config(log_format: str, *, verbose: bool = False) -> dict[str, Any]:
    """A ``dictConfig`` for this process and uvicorn's: one handler on stderr, every logger
    through it, uvicorn's access lines included (minus progress reports)."""
    formatter = (
        "worker_automation.infra.logs.JsonFormatter"
        if log_format == "json"
        else ("worker_automation.infra.logs.TextFormatter")
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"app": {"()": formatter}},
        "filters": {
            "quiet_progress": {"()": "worker_automation.infra.logs.QuietProgress"},
            "forced_exit": {"()": "worker_automation.infra.logs.ForcedExit"},
        },
        "handlers": {
            "app": {"class": "logging.StreamHandler", "formatter": "app", "stream": "ext://sys.stderr"}
        },
        "loggers": {
            "uvicorn": {"handlers": [], "level": "INFO", "propagate": True},
            "uvicorn.error": {"level": "INFO", "propagate": True, "filters": ["forced_exit"]},
            "uvicorn.access": {"level": "INFO", "propagate": True, "filters": ["quiet_progress"]},
            **{name: {"level": "WARNING"} for name in QUIET_LOGGERS},
        },
        "root": {"handlers": ["app"], "level": "DEBUG" if verbose else "INFO"},
    }


def configure(log_format: str, *, verbose: bool = False) -> None:
    """Set up this process's logging (the CLI does it once, before any command runs). Python's
    warnings go through it too (logger ``py.warnings``): with ``json``, not one line of plain text."""
    logging.config.dictConfig(log_config(log_format, verbose=verbose))
    logging.captureWarnings(True)
