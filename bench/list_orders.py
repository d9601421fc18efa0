"""Time the job list's newer pages straight through the resolver on a loaded database: a free-text
search (``q`` over context values too), a created range, and a page in each explicit order, first
page and a cursor slice after it.

    python -m bench.list_orders --database wa_bench_1m --repeats 20

One client, sequential: the figures are the statement's cost (median and worst of the repeats, ms),
not a load test (``bench.scale`` is that).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any

from worker_automation.models.database import Database
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.job_order import Direction, JobOrder, OrderField
from worker_automation.resolvers.job_views import views_of
from worker_automation.resolvers.pagination import position_of_cursor
from worker_automation.resolvers.reads import list_page, slice_after
from worker_automation.settings import Settings


async def _timed(repeats: int, run: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    await run()  # the statement prepared and its pages cached, as in a running server
    spent = []
    for _ in range(repeats):
        started = time.perf_counter()
        await run()
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent), max(spent)


async def measure(database: str, repeats: int, q: list[str]) -> None:
    settings = Settings(database_url=f"postgresql+asyncpg://postgres@127.0.0.1:5432/{database}")
    db = Database(settings)
    queues = settings.queues
    try:
        newest = await list_page(db, queues, JobFilter(), 1, 1, views_of, documents=False)
        top = newest.items[0].created_at
        cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = []
        page = partial(list_page, db, queues, page=1, per_page=20, build=views_of, documents=False)
        for text in q:
            cases.append((f"q={text!r}", partial(page, JobFilter(q=text))))
        week = JobFilter(created_from=top - timedelta(days=8), created_to=top - timedelta(days=1))
        cases.append(("created range (7 days)", partial(page, week)))
        for field in OrderField:
            for direction in Direction:
                order = JobOrder(field, direction)
                first = await slice_after(
                    db, queues, JobFilter(), 20, None, views_of, documents=False, order=order
                )
                key, after = position_of_cursor(first.end_cursor or "", order)
                cases.append((f"order {order.name} page 1", partial(page, JobFilter(), order=order)))
                cases.append(
                    (
                        f"order {order.name} after a cursor",
                        partial(
                            slice_after,
                            db,
                            queues,
                            JobFilter(),
                            20,
                            after,
                            views_of,
                            documents=False,
                            order=order,
                            after_key=key,
                        ),
                    )
                )
        for name, run in cases:
            median, worst = await _timed(repeats, run)
            print(f"{name:<40} median {median:8.1f} ms  max {worst:8.1f} ms")
    finally:
        await db.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", required=True, help="a database filled by bench.load_rows")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--q", action="append", help="texts to search for (default: a CNPJ's digits and a word)"
    )
    args = parser.parse_args(argv)
    asyncio.run(measure(args.database, args.repeats, args.q or ["11222333", "zzzz-nada"]))


if __name__ == "__main__":
    main()
