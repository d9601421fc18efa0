"""The HTTP server of ``serve``: uvicorn's, draining the embedded pool workers before it stops."""

from __future__ import annotations

import socket

import uvicorn

from worker_automation.runtime import Runtime


class DrainingServer(uvicorn.Server):
    """On Ctrl-C or SIGTERM, the pool workers an embedded ``serve`` started are stopped first,
    while the API still answers them: a job running then is reported finished, or failed at the
    end of the workers' grace period, instead of being left EXECUTANDO by an API that stopped
    listening before its workers."""

    def __init__(self, config: uvicorn.Config, runtime: Runtime) -> None:
        super().__init__(config)
        self.runtime = runtime

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.runtime.drain()
        await super().shutdown(sockets)
