"""``GET /metrics``: the counted families of every API process, plus what is read at scrape time.

One process: the default registry (our families, the process, platform and GC collectors).
``serve --workers N``: each process writes its values to files in ``PROMETHEUS_MULTIPROC_DIR``
(a private directory ``serve`` makes before starting them and removes when it stops), and a scrape
of any process merges them (counters and histograms add up; ``wa_subscribers`` sums the live
processes). Queue lengths, job rows by status and the broker's state are read when scraped.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError

from worker_automation.domain.errors import Unavailable
from worker_automation.resolvers.counts import counters
from worker_automation.resolvers.services import Services

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
_PID_FILE = re.compile(r"_(\d+)\.db$")


DIR_PREFIX: Final = "wa-metrics-"
_SERVE_DIR = re.compile(rf"^{DIR_PREFIX}(\d+)-")


def make_multiprocess_dir() -> Path:
    """A fresh private directory for the processes about to start, exported to them. Named after
    this ``serve``'s pid: the directories of earlier ones that were killed (and so could not
    remove theirs) are removed here."""
    base = Path(tempfile.gettempdir())
    for entry in base.glob(f"{DIR_PREFIX}*"):
        match = _SERVE_DIR.match(entry.name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
    path = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
    os.environ[MULTIPROC_ENV] = str(path)
    return path


def remove_multiprocess_dir(path: Path) -> None:
    os.environ.pop(MULTIPROC_ENV, None)
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forget_dead_processes() -> int:
    """Drop the live gauges of processes that are gone (a replaced worker); their counters stay,
    since what they counted did happen. Returns how many processes were forgotten."""
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory or not os.path.isdir(directory):
        return 0
    pids = {int(m.group(1)) for name in os.listdir(directory) if (m := _PID_FILE.search(name))}
    dead = [pid for pid in pids if pid != os.getpid() and not _alive(pid)]
    for pid in dead:
        mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
    return len(dead)


class ScrapeValues(Collector):
    """Values read at scrape time (set by :meth:`Exporter.render` just before collecting)."""

    def __init__(self) -> None:
        self.queue_lengths: dict[str, int] = {}
        self.broker_up = False
        self.rows: dict[tuple[str, str], int] | None = None

    def collect(self) -> Iterator[Metric]:
        lengths = GaugeMetricFamily(
            "wa_queue_length", "Task messages waiting in each broker queue (all priorities)", labels=["queue"]
        )
        for queue, length in sorted(self.queue_lengths.items()):
            lengths.add_metric([queue], length)
        yield lengths
        yield GaugeMetricFamily("wa_broker_up", "1 when the broker answers", value=1 if self.broker_up else 0)
        if self.rows is not None:
            rows = GaugeMetricFamily("wa_jobs", "Job rows by queue and status", labels=["queue", "status"])
            for (queue, status), count in sorted(self.rows.items()):
                rows.add_metric([queue, status], count)
            yield rows


class _Default(Collector):
    """The process's default registry (our families and the stock collectors)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


class Exporter:
    """Builds the exposition for one app; multiprocess when ``serve`` set the directory up."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.scraped = ScrapeValues()
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        if self.multiprocess:
            forget_dead_processes()
            MultiProcessCollector(self.registry)  # type: ignore[no-untyped-call]
            ProcessCollector(registry=self.registry)
        else:
            self.registry.register(_Default())
        self.registry.register(self.scraped)

    async def render(self, services: Services) -> bytes:
        try:
            self.scraped.queue_lengths = await services.broker.queue_lengths()
            self.scraped.broker_up = True
        except Unavailable:
            self.scraped.queue_lengths, self.scraped.broker_up = {}, False
        try:
            async with services.db.reader() as session:
                self.scraped.rows = await counters(session)
        except (SQLAlchemyError, OSError, Unavailable):
            self.scraped.rows = None
        return generate_latest(self.registry)
