"""The authenticated websockets of this process, by the key (operator or machine) that opened them.

Three budgets hang on that: how many sockets one key may hold open (``WA_WS_MAX_SOCKETS_PER_KEY``),
how many of a key's queries and mutations run at once (:data:`RUNS_AT_ONCE_PER_KEY`), and the bytes
of answers in flight across a socket's operations and across a key's sockets (one
:class:`~worker_automation.schema.response_budget.SharedBudget` each, of
``WA_GRAPHQL_MAX_RESPONSE_BYTES``).

And one rule: a socket lives no longer than the permission it was let in with (the key's scopes
and perfil; the machine's key, and its being on). Before every event delivered the socket's
:attr:`OpenSocket.ended` flag is read, nothing more. The flag is set by a check of the key against
the database, run when the event bus announces a change of that key (:class:`AccessChange`, from
whichever replica or command made it) and, for every key holding a socket, every
:data:`RECHECK_SECONDS` in case a notice was lost. The socket's handler then closes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from worker_automation.broker.access_changes import AccessChange
from worker_automation.domain.sharing import consume
from worker_automation.infra.cancelling import end_patiently
from worker_automation.resolvers.auth import Principal, principals_by_id
from worker_automation.resolvers.machines import MachineView, machine_grants
from worker_automation.resolvers.services import Services
from worker_automation.schema.response_budget import SharedBudget

logger = logging.getLogger(__name__)
T = TypeVar("T")

# How often the keys holding sockets are read again, whatever the bus said.
RECHECK_SECONDS: Final = 2.0
# Queries and mutations of one key run this many at a time over websockets; the others wait their
# turn. Each holds its rows and its answer in memory while it runs: a socket may carry
# WA_WS_MAX_OPERATIONS of them and a key WA_WS_MAX_SOCKETS_PER_KEY sockets, and all of them
# fetching a page of 60 KB contexts at once would take gigabytes before any answer is refused.
RUNS_AT_ONCE_PER_KEY: Final = 4
# How long stopping the process waits for a check in progress to end by itself (its connection goes
# back to the pool) before cancelling it.
STOP_PATIENCE_SECONDS: Final = 5.0

Holder = tuple[Literal["key", "machine"], int]


class SocketLimitReached(Exception):
    """The key already holds ``WA_WS_MAX_SOCKETS_PER_KEY`` sockets in this process."""

    def __init__(self, limit: int) -> None:
        self.message = f"Conexoes demais abertas com esta chave (maximo {limit}, WA_WS_MAX_SOCKETS_PER_KEY)."
        super().__init__(self.message)


@dataclass(frozen=True)
class Grant:
    """What a socket was let in with."""

    principal: Principal | None = None
    machine: MachineView | None = None
    machine_key_hash: str | None = None

    @property
    def holders(self) -> tuple[Holder, ...]:
        found: list[Holder] = []
        if self.principal is not None:
            found.append(("key", self.principal.key_id))
        if self.machine is not None:
            found.append(("machine", self.machine.id))
        return tuple(found)

    def holds(self, keys: dict[int, Principal], machines: dict[int, tuple[str, bool]]) -> bool:
        """Whether the keys as they are now still grant all this socket was let in with."""
        granted = self.principal
        if granted is not None:
            now = keys.get(granted.key_id)
            if now is None or not granted.scopes <= now.scopes or (granted.is_manager and not now.is_manager):
                return False
        if self.machine is not None:
            found = machines.get(self.machine.id)
            if found is None or found != (self.machine_key_hash, True):
                return False
        return True


class OpenSocket:
    """One authenticated websocket: what it was let in with, its budgets and its end."""

    def __init__(
        self,
        grant: Grant,
        budgets: tuple[SharedBudget, ...],
        gate: asyncio.Semaphore,
        lookups: set[asyncio.Future[Any]] | None = None,
    ) -> None:
        self.grant = grant
        # The socket's own budget first, then its key's.
        self.budgets = budgets
        self.gate = gate
        self.ended = False
        self._close: Callable[[], Awaitable[None]] | None = None
        self._closing: asyncio.Task[None] | None = None
        # Key reads of this socket's operations still running (see :meth:`to_its_end`).
        self._lookups: set[asyncio.Future[Any]] = lookups if lookups is not None else set()

    async def to_its_end(self, lookup: Coroutine[Any, Any, T]) -> T:
        """``lookup`` (a key read from the database), run to its end even if the operation is
        cancelled meanwhile, and waited for when the process stops. A client ending an operation
        (``complete``, or leaving) cancels it, often while its key is still being read; cut off
        while SQLAlchemy checks a connection out, the read never gives it back to the pool."""
        running = asyncio.ensure_future(lookup)
        self._lookups.add(running)
        running.add_done_callback(self._lookups.discard)
        running.add_done_callback(consume)
        return await asyncio.shield(running)

    def on_end(self, close: Callable[[], Awaitable[None]]) -> None:
        """How the handler closes the socket once its permission ended."""
        self._close = close
        if self.ended:
            self._start_closing()

    def end(self) -> None:
        """The permission ended: nothing more is delivered, and the socket is closed."""
        if not self.ended:
            self.ended = True
            self._start_closing()

    def _start_closing(self) -> None:
        if self._close is not None and self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._run_close(self._close))

    @staticmethod
    async def _run_close(close: Callable[[], Awaitable[None]]) -> None:
        try:
            await close()
        except Exception as exc:  # the client left first: nothing left to close
            logger.debug("closing a websocket whose permission ended: %s", exc)


class OpenSockets:
    """The authenticated sockets of this process (see module doc)."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._max_per_key = services.settings.ws_max_sockets_per_key
        self._max_bytes = services.settings.graphql_max_response_bytes
        self._by_holder: dict[Holder, set[OpenSocket]] = {}
        self._key_budgets: dict[Holder, SharedBudget] = {}
        self._gates: dict[Holder, asyncio.Semaphore] = {}
        self._due: set[Holder] = set()
        self._wake = asyncio.Event()
        self._checker: asyncio.Task[None] | None = None
        self._checked = True  # the last check ran (a failure is logged once, not every sweep)
        self._stopped = False
        self._lookups: set[asyncio.Future[Any]] = set()
        services.events.watch_access(self._heard)

    def __len__(self) -> int:
        return sum(len(sockets) for sockets in self._by_holder.values())

    def open(self, grant: Grant) -> OpenSocket:
        """Register a socket just let in; SocketLimitReached when its key holds too many."""
        holders = grant.holders
        for holder in holders:
            if len(self._by_holder.get(holder, ())) >= self._max_per_key:
                raise SocketLimitReached(self._max_per_key)
        key_budgets = tuple(
            self._key_budgets.setdefault(holder, SharedBudget(self._max_bytes, "desta chave"))
            for holder in holders
        )
        # A socket with both kinds of key waits in its operator key's line.
        gate = self._gates.setdefault(holders[0], asyncio.Semaphore(RUNS_AT_ONCE_PER_KEY))
        budgets = (SharedBudget(self._max_bytes, "desta conexao"), *key_budgets)
        socket = OpenSocket(grant, budgets, gate, self._lookups)
        for holder in holders:
            self._by_holder.setdefault(holder, set()).add(socket)
        if not self._stopped and (self._checker is None or self._checker.done()):
            self._checker = asyncio.get_running_loop().create_task(self._watch())
        return socket

    def close(self, socket: OpenSocket) -> None:
        """The socket is gone."""
        for holder in socket.grant.holders:
            sockets = self._by_holder.get(holder)
            if sockets is None:
                continue
            sockets.discard(socket)
            if not sockets:
                del self._by_holder[holder]
                self._key_budgets.pop(holder, None)
                self._gates.pop(holder, None)
        if not self._by_holder:
            self._wake.set()  # the watch ends now rather than at its next sweep

    def key_budget(self, key_id: int) -> SharedBudget | None:
        """The bytes of answers in flight across the sockets of operator key ``key_id``."""
        return self._key_budgets.get(("key", key_id))

    def _heard(self, change: AccessChange | None) -> None:
        """A notice from the bus (None: notices may have been missed): check those keys now."""
        if change is None:
            self._due.update(self._by_holder)
        else:
            if change.key_id is not None:
                self._due.add(("key", change.key_id))
            if change.machine_id is not None:
                self._due.add(("machine", change.machine_id))
        self._wake.set()

    async def _watch(self) -> None:
        """Check the keys the bus names at once, and every key holding a socket periodically;
        ends when no socket is left (the next one starts it again)."""
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + RECHECK_SECONDS
        while self._by_holder and not self._stopped:
            try:
                async with asyncio.timeout(max(0.0, next_sweep - loop.time())):
                    await self._wake.wait()
            except TimeoutError:
                self._due.update(self._by_holder)
                next_sweep = loop.time() + RECHECK_SECONDS
            self._wake.clear()
            due = {holder for holder in self._due if holder in self._by_holder}
            self._due.clear()
            if not due or self._stopped:
                continue
            try:
                await self.check(due)
            except Exception as exc:  # the database is away: the next sweep tries again
                if self._checked:
                    logger.warning("websocket permissions not checked: %s", exc)
                self._checked = False
            else:
                self._checked = True

    async def stop(self) -> None:
        """The process stops: no check starts any more, and the one in progress ends first (its
        database connection goes back to the pool before the pool is closed)."""
        self._stopped = True
        self._wake.set()
        task, self._checker = self._checker, None
        await end_patiently(task, STOP_PATIENCE_SECONDS)
        for lookup in list(self._lookups):
            await end_patiently(lookup, STOP_PATIENCE_SECONDS)

    async def check(self, holders: set[Holder]) -> None:
        """Read the keys of ``holders`` again and end the sockets they no longer allow."""
        db = self._services.db
        keys = await principals_by_id(db, [i for kind, i in holders if kind == "key"])
        machines = await machine_grants(db, [i for kind, i in holders if kind == "machine"])
        for holder in holders:
            for socket in list(self._by_holder.get(holder, ())):
                if not socket.grant.holds(keys, machines):
                    socket.end()
