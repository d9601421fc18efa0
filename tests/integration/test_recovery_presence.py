"""Machine presence in the rows every API replica reads, and which runs its end makes lost.

On real PostgreSQL: a presence opened by one process is seen through the database; a reconnect
that overlaps the old subscription keeps the machine connected when the old one closes; a
presence nobody refreshes any more (its API process died) goes stale; and only runs claimed while
the machine was present, of a machine that is on, are taken as lost once it has been away for the
grace (and, for the periodic reconciler, seen away that long).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tests.integration.test_recovery import running_job
from tests.support.settings import MakeSettings
from worker_automation.models import Job, Machine, utcnow
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.automations import ensure_settings_rows
from worker_automation.resolvers.machines import (
    MachineView,
    machine_named,
    register_machine,
    set_machine_status,
)
from worker_automation.resolvers.presence import Absences, absence_grace, is_connected, machine_present
from worker_automation.resolvers.recovery import Reconciler
from worker_automation.resolvers.services import Services

pytestmark = pytest.mark.services

RECOVERY = 4.0


@pytest.fixture
async def watched(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> AsyncIterator[Services]:
    started = await Services.start(make_settings(pg_database_url, redis_url, recovery_seconds=RECOVERY))
    await ensure_settings_rows(started.db)
    try:
        yield started
    finally:
        await started.close()


async def _view(services: Services, name: str) -> MachineView:
    view = await machine_named(services.db, name)
    assert view is not None
    return view


async def _connected(services: Services, name: str) -> bool:
    view = await _view(services, name)
    return is_connected(view.connected_since, view.last_seen_at, services.settings, utcnow())


async def _released(services: Services, name: str) -> None:
    """Until the background release of a closed presence is in the row."""
    for _ in range(100):
        if not await _connected(services, name):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} still connected")


async def _age(services: Services, machine_id: int, seconds: float) -> None:
    """As if the machine left ``seconds`` ago (and its runs started before that)."""
    then = utcnow() - timedelta(seconds=seconds)
    async with services.db.session() as session:
        await session.execute(
            update(Machine).where(Machine.id == machine_id).values(connected_since=None, last_seen_at=then)
        )
        await session.execute(
            update(Job).where(Job.machine_id == machine_id).values(data_inicio=then - timedelta(seconds=1))
        )


async def test_presence_is_in_the_row_and_survives_an_overlapping_reconnect(watched: Services) -> None:
    services = watched
    await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="m", automation="demo.sleep"
    )
    me = await _view(services, "m")
    assert not await _connected(services, "m") and me.last_seen_at is None

    old = await machine_present(services, me)
    assert await _connected(services, "m")
    # The machine reconnects before the API noticed its old socket closed.
    await asyncio.sleep(0.01)
    new = await machine_present(services, me)
    old.close()
    await asyncio.sleep(0.3)
    assert await _connected(services, "m"), "an old subscription closing ended the new one's presence"
    new.close()
    await _released(services, "m")
    assert (await _view(services, "m")).last_seen_at is not None


async def test_a_presence_nobody_refreshes_goes_stale(watched: Services) -> None:
    services = watched
    await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="m", automation="demo.sleep"
    )
    me = await _view(services, "m")
    presence = await machine_present(services, me)
    # Its API process dies: nothing refreshes or clears the row.
    assert presence._refresher is not None
    presence._refresher.cancel()
    async with services.db.session() as session:
        await session.execute(
            update(Machine).where(Machine.id == me.id).values(last_seen_at=utcnow() - timedelta(minutes=1))
        )
    row = await _view(services, "m")
    assert row.connected_since is not None and not await _connected(services, "m")


async def test_which_runs_of_a_machine_that_left_are_lost(watched: Services) -> None:
    services = watched
    queues = services.settings.queues
    gone = await register_machine(services.db, CLI_ACTOR, queues, name="gone", automation="demo.sleep")
    off = await register_machine(services.db, CLI_ACTOR, queues, name="off", automation="demo.sleep")
    never = await register_machine(services.db, CLI_ACTOR, queues, name="never", automation="demo.sleep")
    lost = await running_job(services, "demo.sleep", gone.machine.id, "t-gone")
    turned_off = await running_job(services, "demo.sleep", off.machine.id, "t-off")
    unsubscribed = await running_job(services, "demo.sleep", never.machine.id, "t-never")
    grace = absence_grace(services.settings)
    await _age(services, gone.machine.id, grace + 1)
    await _age(services, off.machine.id, grace + 1)
    await set_machine_status(services.db, CLI_ACTOR, off.machine.id, False)

    # By the rows alone (a manual run): the machine away for longer than the grace, at two looks.
    manual = Absences()
    assert await manual.lost_runs(services, watched=False) == []
    assert await manual.lost_runs(services, watched=False) == [(lost, "t-gone", gone.machine.id)]
    # The periodic reconciler counts the absence from its own first look at the latest (an API
    # that was away itself could not see the machine leave).
    absences = Absences()
    assert await absences.lost_runs(services) == []
    assert await absences.lost_runs(services) == []
    await asyncio.sleep(grace)
    assert await absences.lost_runs(services) == [(lost, "t-gone", gone.machine.id)]

    # A run claimed after the machine's presence ended (it runs without a subscription): its own.
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == lost).values(data_inicio=utcnow()))
    assert await absences.lost_runs(services) == []
    async with services.db.session() as session:
        await session.execute(
            update(Job).where(Job.id == lost).values(data_inicio=utcnow() - timedelta(minutes=5))
        )

    reconciler = Reconciler(watch_absences=False)
    assert (await reconciler.run_pass(services)).failed == 0, "one look is not enough"
    report = await reconciler.run_pass(services)
    assert (report.failed, report.job_ids) == (1, [lost])
    async with services.db.reader() as session:
        statuses = dict((await session.execute(select(Job.id, Job.status))).all())
    assert statuses == {lost: "FALHA", turned_off: "EXECUTANDO", unsubscribed: "EXECUTANDO"}


def test_a_machine_cut_off_by_an_outage_comes_back_within_the_absence_grace() -> None:
    """However long the API was away, a machine's next attempt to subscribe again comes well
    before the API (back, with its default window) takes the machine's runs as lost."""
    from itertools import islice

    from worker_automation.settings import Settings
    from worker_automation.worker.machine import RECONNECT_CAP_SECONDS
    from worker_automation.worker.patience import delays

    longest = max(islice(delays(cap=RECONNECT_CAP_SECONDS), 50))
    # Each look of the reconciler is a quarter of the window apart: back within two of them.
    assert longest <= RECONNECT_CAP_SECONDS < absence_grace(Settings()) / 4
