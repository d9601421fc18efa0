"""Which side of an hour a finish-time range's ends are counted from (the totals themselves are
checked against counts in ``tests/integration/test_job_lists.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from worker_automation.resolvers.counts import SLOT_SECONDS, finished_parameters

HOUR = timedelta(seconds=SLOT_SECONDS)
T = datetime(2026, 11, 2, 10, tzinfo=UTC)


def _slot(at: datetime) -> int:
    return int(at.timestamp()) // SLOT_SECONDS


def test_an_end_near_the_start_of_its_hour_is_counted_from_that_start() -> None:
    p = finished_parameters(T + timedelta(minutes=5), T + 5 * HOUR + timedelta(minutes=5))
    # Head: the whole first hour, less its first five minutes. Tail: its own five minutes.
    assert (p["slots_from"], p["head_from"], p["head_to"], p["head_sign"]) == (
        _slot(T),
        T,
        T + timedelta(minutes=5),
        -1,
    )
    assert (p["slots_to"], p["tail_from"], p["tail_to"], p["tail_sign"]) == (
        _slot(T + 5 * HOUR),
        T + 5 * HOUR,
        T + 5 * HOUR + timedelta(minutes=5),
        1,
    )


def test_an_end_near_the_end_of_its_hour_is_counted_from_that_end() -> None:
    p = finished_parameters(T + timedelta(minutes=55), T + 5 * HOUR + timedelta(minutes=55))
    assert (p["slots_from"], p["head_from"], p["head_to"], p["head_sign"]) == (
        _slot(T + HOUR),
        T + timedelta(minutes=55),
        T + HOUR,
        1,
    )
    # The whole last hour, less its last five minutes.
    assert (p["slots_to"], p["tail_from"], p["tail_to"], p["tail_sign"]) == (
        _slot(T + 6 * HOUR),
        T + 5 * HOUR + timedelta(minutes=55),
        T + 6 * HOUR,
        -1,
    )


def test_a_range_inside_one_hour_is_counted_whole() -> None:
    start, end = T + timedelta(minutes=2), T + timedelta(minutes=58)
    p = finished_parameters(start, end)
    assert p["slots_from"] >= p["slots_to"]
    assert (p["head_from"], p["head_to"], p["head_sign"]) == (start, end, 1)
    assert p["tail_from"] >= p["tail_to"]


def test_an_open_end_leaves_its_side_to_the_counters() -> None:
    since = finished_parameters(T + timedelta(minutes=1), None)
    assert (since["head_from"], since["head_to"], since["head_sign"]) == (T, T + timedelta(minutes=1), -1)
    until = finished_parameters(None, T + timedelta(minutes=59))
    assert (until["tail_from"], until["tail_to"], until["tail_sign"]) == (
        T + timedelta(minutes=59),
        T + HOUR,
        -1,
    )
