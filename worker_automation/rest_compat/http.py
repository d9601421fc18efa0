"""What every REST route shares: the envelope, the error table, auth and request parsing."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from worker_automation.domain.errors import (
    RETRY_AFTER_SECONDS,
    BadInput,
    Conflict,
    DomainError,
    Forbidden,
    NotFound,
    Unauthenticated,
    Unavailable,
)
from worker_automation.domain.json_codec import FastJSONResponse
from worker_automation.domain.limits import check_storable, check_text
from worker_automation.domain.sharing import consume
from worker_automation.models.database import database_unavailable, report_outage
from worker_automation.process.runtime import Runtime
from worker_automation.resolvers.auth import (
    MSG_MISSING,
    SCOPE_READ,
    Principal,
    authenticate,
    key_from_headers,
)
from worker_automation.resolvers.machines import MachineKey, MachineView, authenticate_machine, machine_in
from worker_automation.resolvers.services import Services

log = logging.getLogger(__name__)
MSG_INTERNAL = "Erro interno ao processar a requisicao."
MSG_DISCONNECTED = "O cliente encerrou a conexao antes de enviar o corpo."
MSG_DATABASE_DOWN = "Banco de dados indisponivel; tente novamente em instantes."

# Domain error -> HTTP status: the one table of this transport.
STATUS_OF: dict[type[DomainError], int] = {
    BadInput: 422,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Unavailable: 503,
}


def success(message: str, data: Any, status_code: int = 200) -> JSONResponse:
    return FastJSONResponse({"status": "success", "message": message, "data": data}, status_code=status_code)


def error(message: str, status_code: int, data: Any = None) -> JSONResponse:
    response = FastJSONResponse(
        {"status": "error", "message": message, "data": data}, status_code=status_code
    )
    if status_code == 503:
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def error_response(exc: DomainError) -> JSONResponse:
    """The envelope for a domain error; details that help the caller go in ``data``."""
    status_code = next((code for cls, code in STATUS_OF.items() if isinstance(exc, cls)), 500)
    data: dict[str, Any] | None = None
    if isinstance(exc, BadInput):
        data = {"field": exc.field}
    extra = {k: v for k, v in exc.details.items() if k != "field"}
    if extra:
        data = {**(data or {}), **extra}
    return error(exc.message, status_code, data)


Handler = Callable[[Request], Awaitable[Response]]


def guarded(handler: Handler) -> Handler:
    """Turn domain errors raised by ``handler`` into the error envelope."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except DomainError as exc:
            return error_response(exc)
        except ClientDisconnect:
            # The caller left (or its body was refused on the way in): no one reads this answer.
            return error(MSG_DISCONNECTED, 400)
        except Exception as exc:
            if database_unavailable(exc):
                report_outage(log, exc, f"{request.method} {request.url.path}")
                return error(MSG_DATABASE_DOWN, 503)
            # Logged here with its traceback; the caller gets the envelope and never the trace.
            log.exception("unhandled error in %s %s", request.method, request.url.path)
            return error(MSG_INTERNAL, 500)

    run.__name__ = getattr(handler, "__name__", "route")
    run.__doc__ = handler.__doc__
    return run


async def services_of(request: Request) -> Services:
    runtime: Runtime = request.app.state.runtime
    return await runtime.services()


async def principal_of(request: Request, scope: str, *, manager: bool = False) -> tuple[Services, Principal]:
    """Authenticate the operator key and check ``scope`` (and a manager perfil when asked)."""
    services = await services_of(request)
    principal = await authenticate(services.db, key_from_headers(request.headers))
    principal.require(scope, manager=manager)
    return services, principal


ReadHandler = Callable[[Request, Services], Awaitable[Response]]


def answer_key(request: Request) -> tuple[str, str, bytes]:
    """What a read's answer depends on: its path and query string, read off the ASGI scope
    (building ``request.url`` for them cost ~6% of a list page's time)."""
    return ("rest", request.scope["path"], request.scope["query_string"])


def read_route(handler: ReadHandler) -> Handler:
    """A GET route for any key with the read scope, whose answer depends only on its path and
    query string: identical requests arriving together share one answer (each still gets one
    computed after it asked; see :mod:`worker_automation.domain.sharing`)."""

    async def run(request: Request) -> Response:
        services, _ = await principal_of(request, SCOPE_READ)
        key = answer_key(request)
        return await services.db.shared.run(key, lambda: handler(request, services))

    return _route_of(handler, run)


def lookup_route(handler: ReadHandler) -> Handler:
    """A :func:`read_route` whose answer is one read by a unique index (a task by its id): the
    read starts together with the key's lookup instead of after it, so the answer waits for one
    database round trip, not two. The answer waits for the key to be known good; a refused key's
    401 or 403 wins over anything the read raised. The read is not stopped but waited for: stopped
    in the middle of its statement it would leave its connection unusable, never given back to
    the pool, and left running it would outlive the request's answer (and the services it uses,
    at shutdown). It is one indexed row, as cheap as the key's own lookup."""

    async def run(request: Request) -> Response:
        services = await services_of(request)
        raw_key = key_from_headers(request.headers)
        if raw_key is None:
            raise Unauthenticated(MSG_MISSING)
        key = answer_key(request)
        read = asyncio.ensure_future(services.db.shared.run(key, lambda: handler(request, services)))
        try:
            principal = await authenticate(services.db, raw_key)
            principal.require(SCOPE_READ)
        except BaseException:
            read.add_done_callback(consume)  # its outcome is nobody's now
            await asyncio.wait({read})
            raise
        return await read

    return _route_of(handler, run)


def _route_of(handler: ReadHandler, run: Handler) -> Handler:
    run.__name__ = getattr(handler, "__name__", "route")
    run.__doc__ = handler.__doc__
    return guarded(run)


async def machine_of(request: Request) -> tuple[Services, MachineView]:
    services = await services_of(request)
    machine = await authenticate_machine(services.db, request.headers.get("x-worker-api-key"))
    return services, machine


async def machine_key_of(request: Request) -> tuple[Services, MachineKey]:
    """The machine key the request carries, for an operation that checks it in its own statements
    (401 when absent; an unknown key is refused by the operation, before anything changes).
    Run the request's checks and the operation inside :func:`key_first`."""
    return await services_of(request), MachineKey.sent(request.headers.get("x-worker-api-key"))


@asynccontextmanager
async def key_first(services: Services, key: MachineKey) -> AsyncIterator[None]:
    """Bad input from a request whose key is unknown is answered 401, as when the key is looked
    up first: the key is checked when a BadInput is on its way out."""
    try:
        yield
    except BadInput:
        async with services.db.connection() as conn:
            await machine_in(conn, key)
        raise


def int_param(
    raw: str | None,
    field: str,
    *,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    """An integer path or query parameter within [minimum, maximum]; BadInput naming ``field``."""
    if raw is None or raw == "":
        return default
    # Digits as an HTTP client writes them: int() would also take "１" (full width) or " 7_0 ".
    digits = raw[1:] if raw[:1] == "-" else raw
    if not (digits.isascii() and digits.isdigit()):
        raise BadInput(field, f"{field} deve ser um numero inteiro (recebido {raw!r})")
    value = int(raw)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "" if minimum is None else f" >= {minimum}"
        high = "" if maximum is None else f" <= {maximum}"
        joiner = " e" if low and high else ""
        raise BadInput(field, f"{field} deve ser um inteiro{low}{joiner}{high} (recebido {raw!r})")
    return value


def text_param(raw: str | None, field: str, *, max_length: int = 255) -> str | None:
    """A free-text parameter, stripped; None when blank. Refuses NUL (databases reject it)."""
    if raw is None or not raw.strip():
        return None
    value = check_text(raw.strip(), field)
    if len(value) > max_length:
        raise BadInput(field, f"{field} deve ter no maximo {max_length} caracteres")
    return value


def bool_param(raw: str | None, field: str) -> bool:
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "sim"):
        return True
    if value in ("false", "0", "no", "nao", ""):
        return False
    raise BadInput(field, f"{field} deve ser true ou false")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def json_body(
    request: Request, *, required: bool = True, checked: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The request body as a JSON object; BadInput naming ``body`` when absent or malformed, and
    naming the field whose text a database could not store (NUL, lone surrogates) among the
    ``checked`` top-level fields (what the route passes on; other keys are ignored)."""
    raw = await request.body()
    if not raw.strip():
        if required:
            raise BadInput("body", "Corpo da requisicao ausente (JSON esperado)")
        return {}
    try:
        # NaN and Infinity are not JSON and no database column takes them.
        body = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise BadInput("body", "Corpo da requisicao nao e UTF-8 valido") from None
    except (ValueError, RecursionError):
        # ValueError covers malformed JSON and integers too long to read.
        raise BadInput("body", "Corpo da requisicao nao e um JSON valido") from None
    if not isinstance(body, dict):
        raise BadInput("body", "Corpo da requisicao deve ser um objeto JSON")
    check_storable({k: body[k] for k in checked if k in body}, "")
    return body
