"""The ``processes`` subscription: the processes at once, then a new list when one appears or
goes, from one poller per API process however many subscribe, and none once nobody does."""

from __future__ import annotations

from tests.unit.graphql_support import make_api, subscribed
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import register_machine
from worker_automation.resolvers.presence import machine_present
from worker_automation.resolvers.processes import POLL_SECONDS, watch_of
from worker_automation.resolvers.services import Services

SUBSCRIBE = "subscription { processes { name kind status queues runningJobIds } }"


async def test_a_machine_appears_and_goes(embedded_broker_services: Services) -> None:
    services = embedded_broker_services
    api = await make_api(services)
    registered = await register_machine(
        services.db, CLI_ACTOR, services.settings.queues, name="echo-box", automation="demo.echo"
    )
    within = POLL_SECONDS * 3
    async with subscribed(api, SUBSCRIBE) as first, subscribed(api, SUBSCRIBE) as second:
        assert (await first.data(within))["processes"] == []
        assert (await second.data(within))["processes"] == []
        watch = watch_of(services)
        poller = watch._poller
        assert poller is not None and not poller.done()

        presence = await machine_present(services, registered.machine)
        expected = {"name": "echo-box", "kind": "MACHINE", "status": "ONLINE", "queues": ["scan"]}
        for sub in (first, second):
            assert (await sub.data(within))["processes"] == [{**expected, "runningJobIds": []}]
        # Both were served by the one poller of the process.
        assert watch._poller is poller

        presence.close()
        # The row is cleared in the background: wait for it, then for the next look.
        for sub in (first, second):
            assert (await sub.data(within))["processes"] == [
                {**expected, "status": "GONE", "runningJobIds": []}
            ]
    # Nobody listens: the poller ends.
    assert watch._poller is None and poller.done()
