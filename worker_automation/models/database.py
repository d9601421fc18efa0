"""The async engine and session factory, built once per process from the settings."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Final, Protocol

import asyncpg
import orjson
from sqlalchemy import Row, Select, Update, event, make_url, text
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import QueuePool
from sqlalchemy.util import greenlet_spawn

from worker_automation.domain.sharing import SharedReads
from worker_automation.models.base import on_asyncpg
from worker_automation.models.folding import SQLITE_FUNCTION, sqlite_fold
from worker_automation.settings import Settings

# What a resolver's statements run on: an ORM session, or a bare connection on hot paths.
Executor = AsyncSession | AsyncConnection
# A statement the driver may run itself (see driver_statement).
DriverRunnable = Select[*tuple[Any, ...]] | Update


def _unicode_lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # SQLite's built-in lower() folds ASCII only ("Óptica" stays "Óptica"), so case-insensitive
    # searches would miss accented names that PostgreSQL finds; replace it with Python's.
    dbapi_connection.create_function("lower", 1, _unicode_lower, deterministic=True)
    dbapi_connection.create_function(SQLITE_FUNCTION, 1, sqlite_fold, deterministic=True)
    # WAL lets readers proceed while a writer commits; the busy timeout makes writers queue up
    # instead of failing when the API and the CLI share the file.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _refuse_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    # asyncpg reads every connection all the time, so a connection the server closed (a restart,
    # an idle timeout, pg_terminate_backend) is already marked closed when it is checked out.
    # Raising here makes the pool drop it and hand out a fresh one: the same protection as
    # pool_pre_ping without its round trip on every checkout.
    # SQLAlchemy's adapted connection hands out the driver's own (asyncpg's Connection) publicly.
    driver = getattr(dbapi_connection, "driver_connection", None)
    is_closed = getattr(driver, "is_closed", None)
    if callable(is_closed) and is_closed():
        raise DisconnectionError("connection closed by the server")


# What "the database is down or unreachable" looks like from here: refused or dropped
# connections, a server starting up or shutting down, an exhausted pool, a locked SQLite file.
_OUTAGE_ERRORS = (
    InterfaceError,
    # The driver's own, raised where a hot write runs on it directly (see Database.driver_writes):
    # a connection closed under a statement.
    asyncpg.InterfaceError,
    DisconnectionError,
    PoolTimeoutError,
    OSError,
    TimeoutError,
)


# SQLSTATEs of a server that cannot serve: connection exceptions (08), shutting down or starting
# up (57P0x), out of resources (53: disk, memory, connections), a database closed to connections
# (55000).
_OUTAGE_SQLSTATES = ("08", "57P0", "53", "55000")
# Out of resources: the server is up but cannot take the write until an operator makes room.
_EXHAUSTED_SQLSTATE = "53"
# SQLite's OperationalError also means "no such table": only these messages are outages.
_SQLITE_FULL = ("database or disk is full",)
_SQLITE_OUTAGES = ("database is locked", "unable to open database file", "disk i/o error", *_SQLITE_FULL)


def _sqlstate(exc: DBAPIError) -> str | None:
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return sqlstate if isinstance(sqlstate, str) else None


def _driver_sqlstate(exc: asyncpg.PostgresError) -> str:
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate if isinstance(sqlstate, str) else ""


def _sqlite_says(exc: DBAPIError, messages: tuple[str, ...]) -> bool:
    return isinstance(exc, OperationalError) and str(exc.orig).lower().startswith(messages)


def database_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` says the database could not be reached or could not take the write (an
    outage, answered 503), not that a statement was wrong. A full disk is one: every write fails
    alike until space is made, and nothing the caller sent was at fault."""
    if isinstance(exc, asyncpg.PostgresError):
        return _driver_sqlstate(exc).startswith(_OUTAGE_SQLSTATES)
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        sqlstate = _sqlstate(exc)
        if sqlstate is not None and sqlstate.startswith(_OUTAGE_SQLSTATES):
            return True
        if _sqlite_says(exc, _SQLITE_OUTAGES):
            return True
    return isinstance(exc, _OUTAGE_ERRORS)


def database_exhausted(exc: BaseException) -> bool:
    """True when the database is up but out of room: SQLite's ``database or disk is full``
    (SQLITE_FULL), PostgreSQL's class 53 (``disk_full``, ``out_of_memory``, ``too_many_connections``
    ...). Unlike a restart, it does not pass by itself: it is logged as an error for an operator."""
    if isinstance(exc, asyncpg.PostgresError):
        return _driver_sqlstate(exc).startswith(_EXHAUSTED_SQLSTATE)
    if not isinstance(exc, DBAPIError):
        return False
    sqlstate = _sqlstate(exc)
    if sqlstate is not None and sqlstate.startswith(_EXHAUSTED_SQLSTATE):
        return True
    return _sqlite_says(exc, _SQLITE_FULL)


def report_outage(log: logging.Logger, exc: BaseException, where: str) -> None:
    """The one log line of a request refused by an outage (no traceback: the cause is named, and
    the stack of a refused write says nothing more): ERROR when the database is out of room, which
    needs someone to act, WARNING for an outage that passes by itself."""
    level = logging.ERROR if database_exhausted(exc) else logging.WARNING
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    log.log(level, "database unavailable for %s: %s: %s", where, type(exc).__name__, _first_line(cause))


def _first_line(exc: BaseException) -> str:
    said = str(exc).strip()
    return said.splitlines()[0][:200] if said else type(exc).__name__


# asyncpg quotes the value it could not encode ("invalid input for query argument $1: 'v' (...)").
_ARGUMENT_VALUE = re.compile(r"(query argument \$\d+: ).*?( \()", re.S)


def _scrub_parameters(context: ExceptionContext) -> None:
    """Take parameter values out of a failed statement's exceptions (the whole chain), so no log
    line or error text carries a job's data or a key's hash; ``hide_parameters`` covers the
    statement's own summary, this the driver's messages."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [context.sqlalchemy_exception, context.original_exception]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (_ARGUMENT_VALUE.sub(r"\1[oculto]\2", exc.args[0]), *exc.args[1:])
        pending += [exc.__cause__, exc.__context__]


# Session settings of every PostgreSQL connection the service opens.
SERVER_SETTINGS: Final = {"jit": "off"}
# The connections of page reads (see Database.rows) plan each statement once, for any values.
GENERIC_PLANS: Final = {"plan_cache_mode": "force_generic_plan"}


def make_engine(
    database_url: str, *, pool_size: int = 5, max_overflow: int = 5, generic_plans: bool = False
) -> AsyncEngine:
    """An engine tuned for the database behind ``database_url`` (pool sizes: PostgreSQL only);
    with ``generic_plans`` its connections keep one plan per prepared statement (asyncpg only)."""
    if database_url.startswith("sqlite"):
        # (SQLite keeps the standard decoder: SQLAlchemy relies on its TypeError for JSON values
        # the column's numeric affinity turned into numbers.)
        engine = create_async_engine(database_url, connect_args={"timeout": 30}, hide_parameters=True)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # JSON columns are decoded by orjson: rows of lists and live views carry three each, and the
    # standard library's decoder was the largest single cost of turning rows into views.
    options: dict[str, Any] = {}
    if make_url(database_url).get_driver_name() == "asyncpg":
        # No JIT compilation: the service's statements are short, and for one over a large
        # estimate (a text search at 1M rows) compiling took ~330 of its ~400 ms.
        settings = {**SERVER_SETTINGS, **(GENERIC_PLANS if generic_plans else {})}
        options["connect_args"] = {"server_settings": settings}
    engine = create_async_engine(
        database_url,
        **options,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_recycle=1800,
        json_deserializer=orjson.loads,
        # Parameters carry job results, errors and key hashes: never in an error's text or a log.
        hide_parameters=True,
    )
    event.listen(engine.sync_engine, "checkout", _refuse_closed)
    event.listen(engine.sync_engine, "handle_error", _scrub_parameters)
    return engine


@dataclass(frozen=True)
class DriverStatement:
    """A statement compiled once for the driver: its SQL, its parameters' names in order, and
    each one's conversion to what the driver takes (None: taken as it is)."""

    sql: str
    names: tuple[str, ...]
    defaults: Mapping[str, Any]
    converters: tuple[Callable[[Any], Any] | None, ...]

    def values(self, parameters: Mapping[str, Any]) -> list[Any]:
        """The driver's arguments for ``parameters``, converted as SQLAlchemy converts them."""
        values = []
        for name, convert in zip(self.names, self.converters, strict=True):
            value = parameters.get(name, self.defaults[name])
            values.append(value if convert is None else convert(value))
        return values


def driver_statement(
    engine: AsyncEngine, statement: DriverRunnable, *, converting: bool = False
) -> DriverStatement | None:
    """``statement`` as asyncpg runs it, or None when a parameter needs SQLAlchemy at execution (a
    list expanded, a literal rendered, a column default computed) or, unless ``converting``, a
    value its type converts (its bind processor, a public part of the type): such statements
    always take SQLAlchemy's path."""
    dialect = engine.dialect
    if not on_asyncpg(dialect):
        return None
    compiled = statement.compile(dialect=dialect)
    if compiled.literal_execute_params or compiled.post_compile_params:
        return None  # rendered into the text at each execution, by SQLAlchemy
    if compiled.insert_prefetch or compiled.update_prefetch:
        return None  # a column's default or onupdate value, computed by SQLAlchemy
    names = tuple(compiled.positiontup or ())
    converters: list[Callable[[Any], Any] | None] = []
    for name in names:
        bind = compiled.binds.get(name)
        if bind is None or bind.expanding:
            return None
        convert = bind.type.bind_processor(dialect)
        if convert is not None and not converting:
            return None
        converters.append(convert)
    # (A value written in the statement, such as coalesce's 0, is a parameter with its value.)
    defaults = {name: compiled.binds[name].value for name in names}
    return DriverStatement(str(compiled), names, defaults, tuple(converters))


class DriverRow(Sequence[Any]):
    """A row the driver returned, its columns by position and by name (as SQLAlchemy's rows)."""

    __slots__ = ("_record",)

    def __init__(self, record: Any) -> None:
        self._record = record

    def __getattr__(self, name: str) -> Any:
        try:
            return self._record[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self._record)[index]
        return self._record[index]

    def __len__(self) -> int:
        return len(self._record)

    def __iter__(self) -> Any:
        return iter(self._record)


# A row a write returned: SQLAlchemy's, or the driver's with the same access by position and name.
ReturnedRow = Row[*tuple[Any, ...]] | DriverRow


class NotOnDriver(Exception):
    """A statement the driver's path cannot run (a parameter SQLAlchemy computes, a read through
    SQLAlchemy's connection): the operation runs again through SQLAlchemy, the driver's
    transaction rolled back first."""


class Statements(Protocol):
    """Where the statements of one hot operation run: a SQLAlchemy connection
    (:class:`OnConnection`) or, on PostgreSQL, the driver itself (:class:`DriverWrites`). The
    operation is written once against this."""

    async def first(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> ReturnedRow | None:
        """The first row ``statement`` returns (None: none)."""
        ...

    async def execute(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> None: ...

    def connection(self) -> AsyncConnection:
        """For what only SQLAlchemy runs (an ORM read): raises NotOnDriver on the driver."""
        ...


class OnConnection:
    """:class:`Statements` on a SQLAlchemy connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def first(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> ReturnedRow | None:
        return (await self._conn.execute(statement, dict(parameters))).first()

    async def execute(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> None:
        await self._conn.execute(statement, dict(parameters))

    def connection(self) -> AsyncConnection:
        return self._conn


class DriverWrites:
    """:class:`Statements` on a pooled connection's driver, inside a transaction or each committed
    on its own (see :meth:`Database.driver_writes`); a statement it cannot run raises
    :class:`NotOnDriver`."""

    def __init__(self, driver: Any, plans: Callable[[DriverRunnable], DriverStatement | None]) -> None:
        self._driver = driver
        self._plans = plans

    def _plan(self, statement: DriverRunnable) -> DriverStatement:
        plan = self._plans(statement)
        if plan is None:
            raise NotOnDriver
        return plan

    async def first(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> DriverRow | None:
        return await self.first_planned(self._plan(statement), parameters)

    async def first_planned(self, plan: DriverStatement, parameters: Mapping[str, Any]) -> DriverRow | None:
        """:meth:`first` for a statement already planned (see :meth:`Database.write_plan`)."""
        record = await self._driver.fetchrow(plan.sql, *plan.values(parameters))
        return None if record is None else DriverRow(record)

    async def execute(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> None:
        plan = self._plan(statement)
        await self._driver.execute(plan.sql, *plan.values(parameters))

    def connection(self) -> AsyncConnection:
        raise NotOnDriver


# Connections of the pool that list reads leave to everything else (see Database.rows).
READ_SLOTS_SPARED = 4
# The share of the pool (one connection in this many) kept for reads planned once (see
# Database.rows); none below this many connections.
GENERIC_SHARE = 4


def generic_pool_size(settings: Settings) -> int:
    """How many of the pool's connections keep generic plans (PostgreSQL on asyncpg only)."""
    if make_url(settings.database_url).get_driver_name() != "asyncpg":
        return 0
    return settings.database_pool_size // GENERIC_SHARE


class _Slots:
    """A bound on connections held at once, as a semaphore per event loop (a database object
    may outlive the loop it was first used on, as in tests)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(self.count)
            self._loop = loop
        return self._semaphore


class Database:
    """Owns the engine and hands out sessions; closed by the app's lifespan."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.database_url
        generic = generic_pool_size(settings)
        self.engine = make_engine(
            settings.database_url,
            pool_size=settings.database_pool_size - generic,
            max_overflow=settings.database_max_overflow,
        )
        # Page reads whose best plan is the same whatever their values (see :meth:`rows`).
        self._generic_engine = (
            make_engine(settings.database_url, pool_size=generic, max_overflow=0, generic_plans=True)
            if generic
            else None
        )
        self._generic_slots = _Slots(generic)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # Reads run without BEGIN/COMMIT: under READ COMMITTED every statement takes its own
        # snapshot inside a transaction too, so the two extra round trips bought nothing.
        self._autocommit_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.readers = async_sessionmaker(self._autocommit_engine, expire_on_commit=False)
        # Aggregates that many screens poll at once are computed once for all of them.
        self.shared = SharedReads()
        # Hot read statements compiled for the driver, by identity (each kept alive with its entry).
        self._driver_statements: dict[int, tuple[Select[Any], DriverStatement | None]] = {}
        # Hot write statements compiled for the driver, by identity.
        self._driver_writes: dict[int, tuple[DriverRunnable, DriverStatement | None]] = {}
        # How many reads of :meth:`rows` hold a connection at once: fewer than the pool keeps, so
        # a burst of list pages waits a moment for a kept connection instead of opening (and, on
        # return, closing) extra ones, a connect and a statement prepared anew each, and leaves
        # connections in the pool for writes and claims.
        self._read_slots = _Slots(max(1, settings.database_pool_size - READ_SLOTS_SPARED))

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session whose transaction commits on success and rolls back on error."""
        async with self.sessions() as session, session.begin():
            yield session

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A connection inside a transaction (committed on success, rolled back on error) for
        the statements of one hot operation (a claim, a dispatch), without an ORM session."""
        async with self.engine.begin() as conn:
            yield conn

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[AsyncSession]:
        """A session for reads: each statement on its own, no transaction around them."""
        async with self.readers() as session:
            yield session

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A bare connection, every statement committed on its own: for single statements on hot
        paths (key lookups, reporting a job done), where an ORM session costs more than the
        statement it runs."""
        async with self._autocommit_engine.connect() as conn:
            yield conn

    async def rows(
        self,
        statement: Select[Any],
        parameters: Mapping[str, Any],
        *,
        bounded: bool = True,
        generic: bool = False,
    ) -> Sequence[Sequence[Any]]:
        """The rows of a read statement built once and run on every page of a list (a module-level
        statement: it is compiled once, by identity).

        On PostgreSQL the driver runs it directly: SQLAlchemy's execution and result objects cost
        more CPU than the statement's round trip. Anything the driver refuses or fails on is run
        again through SQLAlchemy, which reports it as for any statement (wrapped, parameters
        scrubbed, a broken connection invalidated, an outage told apart); a read can run twice.
        While anything listens to the statements SQLAlchemy sends (instrumentation, a test counting
        them), every statement takes SQLAlchemy's path, so none goes unseen. Rows are plain
        sequences in the statement's column order.

        Reads share a bounded number of connections (see ``READ_SLOTS_SPARED``); ``bounded=False``
        is for the one-row lookups every request makes first (its key), which must never queue
        behind a burst of list pages.

        ``generic`` is for a statement whose best plan is the same for any values of its
        parameters (a page along the index of its filters and order, whatever the page). It runs
        on connections of their own that plan each statement once (``plan_cache_mode``
        ``force_generic_plan``): left to choose, PostgreSQL plans a paged statement anew on every
        execution, because a parameter's ``OFFSET`` makes the generic plan look costlier than it
        is, and the planning took as long as the statement itself. Those connections are a
        quarter of the pool, so such pages also run fewer at once, which leaves the API process
        more of the machine's CPU.
        """
        found = self._driver_statements.get(id(statement))
        if found is None or found[0] is not statement:
            # Parameters are converted as SQLAlchemy would (the instants of a time range, say).
            found = (statement, driver_statement(self.engine, statement, converting=True))
            self._driver_statements[id(statement)] = found
        plan = None if self._watched() else found[1]
        slot: AbstractAsyncContextManager[Any]
        if generic and self._generic_engine is not None:
            engine, slot = self._generic_engine, self._generic_slots()
        else:
            engine, slot = self.engine, (self._read_slots() if bounded else nullcontext())
        async with slot:
            if plan is not None:
                records = await self._driver_fetch(plan.sql, plan.values(parameters), engine)
                if records is not None:
                    return records
            async with self.connection() as conn:
                rows: Sequence[Sequence[Any]] = (await conn.execute(statement, dict(parameters))).all()
                return rows

    def _watched(self) -> bool:
        """Whether anything listens to the statements SQLAlchemy sends (instrumentation, a test
        counting them): then every statement takes SQLAlchemy's path, so none goes unseen."""
        dispatch = self.engine.sync_engine.dispatch
        return bool(dispatch.before_cursor_execute or dispatch.after_cursor_execute)

    def write_plan(self, statement: DriverRunnable) -> DriverStatement | None:
        """A hot write statement (module-level: compiled once, by identity) as the driver runs it,
        its parameters converted as SQLAlchemy would; None when it must take SQLAlchemy's path
        (not PostgreSQL, a parameter SQLAlchemy computes, statements being listened to)."""
        found = self._driver_writes.get(id(statement))
        if found is None or found[0] is not statement:
            found = (statement, driver_statement(self.engine, statement, converting=True))
            self._driver_writes[id(statement)] = found
        return None if self._watched() else found[1]

    @asynccontextmanager
    async def driver_writes(self, *, transaction: bool) -> AsyncIterator[DriverWrites]:
        """The statements of :meth:`write_plan` on a pooled connection's driver, with no
        SQLAlchemy connection around them: for the writes every job makes (its creation, its
        claim, its end), where SQLAlchemy's execution costs several times the statement's round
        trip. With ``transaction``, committed together on success and rolled back on error;
        without, each committed on its own. Each statement runs once: what fails is raised (the
        driver's own errors; :func:`database_unavailable` tells an outage), never run again
        elsewhere, and a connection found broken is dropped from the pool.

        A connection the server has just cut (a restart, a terminated backend) can be handed out
        after the server's goodbye arrived and before the socket closed: the driver then refuses
        the statement with an ``InternalClientError`` about its protocol state, the statement
        unsent, and the connection is closed right after. That is raised as the lost connection
        it is (``ConnectionDoesNotExistError``, an outage), not as a fault of the operation."""
        pooled = await self.engine.raw_connection()
        driver = None
        try:
            driver = pooled.driver_connection
            if driver is None:
                raise asyncpg.InterfaceError("the pool handed out a connection without its driver")
            if transaction:
                async with driver.transaction():
                    yield DriverWrites(driver, self.write_plan)
            else:
                yield DriverWrites(driver, self.write_plan)
        except BaseException as exc:
            if driver is None or driver.is_closed():
                pooled.invalidate()
                if isinstance(exc, asyncpg.InternalClientError):
                    raise asyncpg.ConnectionDoesNotExistError(
                        f"the server closed the connection: {exc}"
                    ) from exc
            raise
        finally:
            await greenlet_spawn(pooled.close)

    async def write_row(self, statement: DriverRunnable, parameters: Mapping[str, Any]) -> ReturnedRow | None:
        """One hot write statement (module-level, see :meth:`write_plan`), committed on its own,
        and the first row it returns (None: none): on the driver when it can run it, run once
        there (see :meth:`driver_writes`), else on SQLAlchemy's autocommit connection."""
        plan = self.write_plan(statement)
        if plan is None:
            async with self.connection() as conn:
                return (await conn.execute(statement, dict(parameters))).first()
        async with self.driver_writes(transaction=False) as writes:
            return await writes.first_planned(plan, parameters)

    async def _driver_fetch(
        self, sql: str, values: list[Any], engine: AsyncEngine
    ) -> Sequence[Sequence[Any]] | None:
        """``sql``'s rows fetched by asyncpg on a connection of ``engine``'s pool, with no
        SQLAlchemy connection around it (setting up and tearing down one cost more than the
        statement); None when it failed, for the caller to run it again through SQLAlchemy. No
        transaction is begun: the driver runs the statement on its own, as the autocommit
        connection would."""
        try:
            pooled = await engine.raw_connection()
        except PoolTimeoutError:
            raise  # the pool is exhausted: waiting for it again would double the wait
        except Exception:
            return None
        broken = False
        driver = None
        try:
            driver = pooled.driver_connection
            if driver is None:
                return None
            records: Sequence[Sequence[Any]] = await driver.fetch(sql, *values)
            return records
        except Exception:  # SQLAlchemy's path reports it properly
            broken = driver is None or bool(driver.is_closed())
            return None
        finally:
            if broken:
                pooled.invalidate()
            await greenlet_spawn(pooled.close)

    async def refresh_idle_connections(self) -> None:
        """One trivial statement on each connection idle in the pool, one after the other
        (PostgreSQL; nothing on SQLite).

        asyncpg keeps the last bytes a connection received until it receives more: after large
        answers, each idle connection would go on holding up to one receive buffer (256 KiB) of
        them, and a pool of 40 up to 10 MB. The pool hands out its idle connections in the order
        they came back, so as many checkouts as there are idle connections visit each once;
        none is opened for this."""
        for engine in (self.engine, self._generic_engine):
            pool = None if engine is None else engine.sync_engine.pool
            if engine is None or not on_asyncpg(engine.dialect) or not isinstance(pool, QueuePool):
                continue
            for _ in range(pool.checkedin()):
                if pool.checkedin() == 0:
                    break
                await self._driver_fetch("SELECT 1", [], engine)

    async def connections_allowed(self) -> int | None:
        """How many connections the PostgreSQL server takes from ordinary roles
        (``max_connections`` less the superusers' reserve); None on SQLite."""
        if self.dialect != "postgresql":
            return None
        async with self.connection() as conn:
            total = int((await conn.execute(text("SHOW max_connections"))).scalar_one())
            reserved = int((await conn.execute(text("SHOW superuser_reserved_connections"))).scalar_one())
        return total - reserved

    async def ping(self) -> bool:
        """True when the database answers a trivial query."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    async def close(self) -> None:
        await self.engine.dispose()
        if self._generic_engine is not None:
            await self._generic_engine.dispose()
