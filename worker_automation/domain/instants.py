"""Instants a caller sends as ISO 8601 text, read one way wherever they come in.

GraphQL's DateTime arguments and the command line's date options go through :func:`parse_instant`,
so a bad one is refused with the same message naming the field, before anything reads it: text
that is no instant, or one so far off that converting it to UTC (or counting hours from 1970 in
it, as the finish-time totals do) would leave the years Python's datetime can hold.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Final

from worker_automation.domain.errors import BadInput

# The instants any range may name: a century before the first job, millennia after the last.
EARLIEST: Final = datetime(1900, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(9000, 1, 1, tzinfo=UTC)
EXAMPLE: Final = "2026-03-02T09:00 ou 2026-03-02T09:00:00-03:00"


def parse_instant(text: object, field: str, tz: tzinfo) -> datetime:
    """``text`` as an aware instant, to the microsecond (one without an offset is read in ``tz``);
    BadInput naming ``field`` when it is no ISO 8601 instant or lies outside the years 1900-8999."""
    if not isinstance(text, str):
        raise BadInput(field, f"{field} deve ser um texto ISO 8601 (ex. {EXAMPLE})")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(field, f"{field} invalido: {text!r} (use ISO 8601, ex. {EXAMPLE})") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    try:
        within = EARLIEST <= moment.astimezone(UTC) < LATEST
    except OverflowError:
        within = False
    if not within:
        raise BadInput(field, f"{field} fora do intervalo: {text!r} (de 1900 a 8999)")
    return moment
