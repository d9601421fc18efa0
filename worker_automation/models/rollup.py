"""The ``automation_rollups`` table: finished jobs per automation, queue and quarter hour, with a
histogram of their run times, kept by database triggers and never deleted by retention.

Health over months outlives the job rows: retention deletes finished jobs, and their counts stay
here. Triggers on ``workers`` write a job's contribution in the transaction that finishes it (and
move it when a finished job changes: a late report, a retry), whoever writes the row; deleting a
job leaves its contribution in place. Slots are quarter hours of UTC (``epoch // 900``), so a day
of any time zone (whose offsets are whole quarter hours) is a range of slots, chosen when read.

A fixed-bucket histogram of run times merges by addition, so percentiles of a day (or of any
range) come from summing its slots; a percentile read from it is within one bucket's width.

``automation_rollups_daily`` holds the same sums per UTC day (``slot // 96``), kept by the same
triggers, so a range of months reads days instead of quarter hours (see
``resolvers.rollup_reads``); retention leaves it as it leaves the quarter hours.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table

from worker_automation.models.base import Base

# Seconds per slot.
SLOT_SECONDS: Final = 900
# Seconds per day of the daily rollups, and slots per such day.
DAY_SECONDS: Final = 86_400
DAY_SLOTS: Final = DAY_SECONDS // SLOT_SECONDS
# Upper bounds (exclusive, in milliseconds) of the run-time buckets: about x1.5 apart, from 20 ms to
# 18 hours; a last, open bucket holds longer runs. The migration that made the table holds the
# same numbers: changing them needs a migration that rebuilds the histograms.
DURATION_BOUNDS_MS: Final[tuple[int, ...]] = (
    20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1_100, 1_700, 2_500, 3_800, 5_750, 8_500,
    13_000, 20_000, 30_000, 45_000, 65_000, 100_000, 150_000, 225_000, 335_000, 500_000,
    750_000, 1_100_000, 1_700_000, 2_500_000, 3_800_000, 5_750_000, 8_500_000, 13_000_000,
    20_000_000, 30_000_000, 45_000_000, 65_000_000,
)  # fmt: skip
# One column per bucket: ``d00`` counts runs under 20 ms, the last one runs of 65,000,000 ms or more.
DURATION_COLUMNS: Final[tuple[str, ...]] = tuple(f"d{i:02d}" for i in range(len(DURATION_BOUNDS_MS) + 1))
COUNT_COLUMNS: Final = ("completed", "failed", "cancelled")

automation_rollups: Final = Table(
    "automation_rollups",
    Base.metadata,
    Column("automation_type", String(100), primary_key=True),
    Column("slot", Integer, primary_key=True),
    Column("queue", String(50), primary_key=True),
    *(Column(name, BigInteger, nullable=False) for name in COUNT_COLUMNS),
    *(Column(name, BigInteger, nullable=False) for name in DURATION_COLUMNS),
    # Throughput of every automation (or of one queue) over a range of slots.
    Index("ix_automation_rollups_slot", "slot"),
)

automation_rollups_daily: Final = Table(
    "automation_rollups_daily",
    Base.metadata,
    Column("automation_type", String(100), primary_key=True),
    # UTC days since the epoch: the slots ``day * DAY_SLOTS`` to ``(day + 1) * DAY_SLOTS``.
    Column("day", Integer, primary_key=True),
    Column("queue", String(50), primary_key=True),
    *(Column(name, BigInteger, nullable=False) for name in COUNT_COLUMNS),
    *(Column(name, BigInteger, nullable=False) for name in DURATION_COLUMNS),
    Index("ix_automation_rollups_daily_day", "day"),
)
