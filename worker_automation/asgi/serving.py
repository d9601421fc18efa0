"""The HTTP server of ``serve``: uvicorn's, saying where everything is once the service is ready,
and draining the embedded pool workers before it stops."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Final

import uvicorn

from worker_automation.console.routes import CONSOLE_PATH
from worker_automation.infra.cancelling import cancel_and_wait
from worker_automation.process.runtime import Runtime
from worker_automation.rest_compat.api_table import WA

log = logging.getLogger(__name__)
GRAPHIQL: Final = "/graphql"
KEY_COMMAND: Final = (
    "worker-automation keys create --perfil administrador "
    "--scopes worker_automation:read,worker_automation:write"
)


def ready_banner(api_url: str, *, key_exists: bool) -> str:
    """What ``serve`` says once ready: where the console, GraphiQL and the API are, and how to
    make the first key when there is none."""
    base = api_url.rstrip("/")
    lines = [
        "ready",
        f"  console:  {base}{CONSOLE_PATH}",
        f"  GraphiQL: {base}{GRAPHIQL}",
        f"  API:      {base}{WA}",
    ]
    if not key_exists:
        lines += ["no API key exists yet; create one with:", f"  {KEY_COMMAND}"]
    return "\n".join(lines)


class DrainingServer(uvicorn.Server):
    """Once listening and ready (an embedded serve: its pool workers too), says where things are.

    On Ctrl-C or SIGTERM, the pool workers an embedded ``serve`` started are stopped first,
    while the API still answers them: a job running then is reported finished, or failed at the
    end of the workers' grace period, instead of being left EXECUTANDO by an API that stopped
    listening before its workers."""

    def __init__(self, config: uvicorn.Config, runtime: Runtime) -> None:
        super().__init__(config)
        self.runtime = runtime
        self._announcing: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._announcing = asyncio.create_task(self._announce(), name="ready-banner")

    async def _announce(self) -> None:
        from worker_automation.resolvers.auth import list_keys

        await self.runtime.wait_ready()
        services = await self.runtime.services()
        try:
            key_exists = any(key.revoked_at is None for key in await list_keys(services.db))
        except Exception as exc:  # the banner must not take serve down
            log.warning("API keys not read: %s", exc)
            key_exists = True
        log.info(ready_banner(services.settings.api_url, key_exists=key_exists))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await cancel_and_wait(self._announcing)
        await self.runtime.drain()
        await super().shutdown(sockets)
