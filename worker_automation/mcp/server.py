"""The MCP server: the service's operations as tools for an LLM client.

A transport like ``rest_compat``: each tool authenticates the caller's API key, checks the same
scope as the matching REST route, calls the same resolver and returns the same JSON as that
route's ``data``. Served over stdio by ``worker-automation mcp`` (the key from ``WA_API_KEY`` or
``--api-key``) and over streamable HTTP at ``/mcp`` by ``serve`` (the key from ``X-API-Key`` or
``Authorization: Bearer``, per request). The HTTP transport is stateless with JSON answers, so
any process of ``serve --workers N`` can answer any request.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from starlette.types import ASGIApp

from worker_automation import package_version
from worker_automation.domain.errors import (
    BadInput,
    DomainError,
)
from worker_automation.domain.limits import INT32_MAX, INT32_MIN
from worker_automation.resolvers import job_actions, live
from worker_automation.resolvers import reads as read_ops
from worker_automation.resolvers.auth import (
    SCOPE_READ,
    SCOPE_WRITE,
    Principal,
    authenticate,
    key_from_headers,
)
from worker_automation.resolvers.automations import all_effective
from worker_automation.resolvers.dispatch import dispatch
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.search import search_automations
from worker_automation.resolvers.services import Services
from worker_automation.rest_compat.http import text_param
from worker_automation.rest_compat.reads import dashboard_dict, page_dict
from worker_automation.settings import Settings

log = logging.getLogger(__name__)

SERVER_NAME: Final = "worker-automation"
INSTRUCTIONS: Final = (
    "Execucoes de automacoes (certidoes, scrapers, scans, observadores, automacoes de UI) da "
    "plataforma Alcance: consulte o status de uma task, liste e resuma execucoes, busque "
    "automacoes, dispare, cancele e re-enfileire execucoes."
)
READ_ONLY: Final = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
WRITE: Final = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)

ServicesSource = Callable[[], Awaitable[Services]]
KeySource = Callable[[Context], str | None]


def tool_error(exc: DomainError) -> ToolError:
    code = exc.code
    field = f" (campo {exc.field})" if isinstance(exc, BadInput) else ""
    return ToolError(f"{code}: {exc.message}{field}")


def _int_in_range(value: int | None, field: str, minimum: int, maximum: int = INT32_MAX) -> int | None:
    if value is not None and not minimum <= value <= maximum:
        raise BadInput(field, f"{field} deve ser um inteiro >= {minimum} e <= {maximum} (recebido {value})")
    return value


def build_server(
    services_source: ServicesSource,
    key_source: KeySource,
    *,
    lifespan: Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]] | None = None,
) -> MCPServer[Any]:
    """The server with its seven tools; ``services_source`` and ``key_source`` say where a call
    finds the service and the caller's key (they differ between stdio and HTTP)."""
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        version=package_version(),
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
    )

    async def caller(ctx: Context, scope: str) -> tuple[Services, Principal]:
        services = await services_source()
        principal = await authenticate(services.db, key_source(ctx))
        principal.require(scope)
        return services, principal

    @asynccontextmanager
    async def domain_errors() -> AsyncIterator[None]:
        try:
            yield
        except DomainError as exc:
            raise tool_error(exc) from None

    @server.tool(annotations=READ_ONLY)
    async def consultar_status_task(task_id: str, ctx: Context) -> dict[str, Any]:
        """Consulta o status de uma task Celery pelo task_id: estado (PENDING, STARTED, SUCCESS,
        FAILURE, REVOKED), progresso, resultado ou erro e o worker (execucao) correspondente."""
        async with domain_errors():
            services, _ = await caller(ctx, SCOPE_READ)
            status = await live.task_status(services, text_param(task_id, "task_id") or "")
            return status.as_dict()

    @server.tool(annotations=READ_ONLY)
    async def listar_workers(
        ctx: Context,
        status: str | None = None,
        queue: str | None = None,
        automation_type: str | None = None,
        cliente_id: int | None = None,
        usuario_id: int | None = None,
        task_id: str | None = None,
        q: str | None = None,
        page: int = 1,
        per_page: int = 20,
    ) -> dict[str, Any]:
        """Lista as execucoes (workers) com filtros opcionais: status (AGENDADO, EXECUTANDO,
        CONCLUIDO, FALHA, CANCELADO), fila, tipo de automacao, cliente, usuario, task_id e busca
        livre (q); paginado (page a partir de 1, per_page ate 100), mais recentes primeiro."""
        async with domain_errors():
            services, _ = await caller(ctx, SCOPE_READ)
            filters = JobFilter(
                status=text_param(status, "status"),
                queue=text_param(queue, "queue"),
                automation_type=text_param(automation_type, "automation_type"),
                cliente_id=_int_in_range(cliente_id, "cliente_id", INT32_MIN),
                usuario_id=_int_in_range(usuario_id, "usuario_id", INT32_MIN),
                task_id=text_param(task_id, "task_id"),
                q=text_param(q, "q"),
            )
            found = await read_ops.list_jobs(
                services.db,
                services.settings.queues,
                filters,
                _int_in_range(page, "page", 1),
                _int_in_range(per_page, "per_page", 1),
            )
            return page_dict(found, services.settings.tz)

    @server.tool(annotations=READ_ONLY)
    async def resumo_dashboard(ctx: Context) -> dict[str, Any]:
        """Resumo do painel: estatisticas por status e fila, carga de cada fila, estado do broker,
        execucoes ativas, proximas na fila e as ultimas finalizadas."""
        async with domain_errors():
            services, _ = await caller(ctx, SCOPE_READ)
            board = await live.dashboard(services)
            return dashboard_dict(board, services.settings.queues, services.settings.tz)

    @server.tool(annotations=READ_ONLY)
    async def buscar_automacoes(ctx: Context, q: str | None = None) -> dict[str, Any]:
        """Busca automacoes pelo nome ou descricao (busca aproximada, melhores primeiro); sem q,
        lista todas agrupadas por categoria. Use a chave (key) retornada para disparar."""
        async with domain_errors():
            services, _ = await caller(ctx, SCOPE_READ)
            result = search_automations(await all_effective(services.db), text_param(q, "q"))
            return result.to_dict()

    @server.tool(annotations=WRITE)
    async def disparar_automacao(
        automation_type: str,
        ctx: Context,
        cliente_id: int | None = None,
        context: dict[str, Any] | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Dispara uma automacao: cria a execucao (status AGENDADO) e a envia para a fila. O
        context e validado contra o formulario da automacao; priority de 0 (primeiro) a 9. Com
        idempotency_key (ate 255 caracteres): repetida com o mesmo pedido, devolve a execucao ja
        criada por ela em vez de criar outra; use uma chave nova por disparo."""
        async with domain_errors():
            services, principal = await caller(ctx, SCOPE_WRITE)
            view = await dispatch(
                services,
                principal.actor,
                automation_type=automation_type,
                cliente_id=cliente_id,
                context={} if context is None else context,
                priority=priority,
                idempotency_key=idempotency_key,
            )
            return view.as_dict(services.settings.tz)

    @server.tool(annotations=WRITE)
    async def cancelar_worker(id: int, ctx: Context) -> dict[str, Any]:
        """Cancela uma execucao agendada ou em andamento pelo id (a task e revogada)."""
        async with domain_errors():
            services, principal = await caller(ctx, SCOPE_WRITE)
            view = await job_actions.cancel(services, principal.actor, _int_in_range(id, "id", 1) or 0)
            return view.rest_item(services.settings.tz)

    @server.tool(annotations=WRITE)
    async def retentar_worker(id: int, ctx: Context) -> dict[str, Any]:
        """Re-enfileira uma execucao que falhou ou foi cancelada (nova task, retry_count + 1)."""
        async with domain_errors():
            services, principal = await caller(ctx, SCOPE_WRITE)
            view = await job_actions.retry(services, principal.actor, _int_in_range(id, "id", 1) or 0)
            return view.rest_item(services.settings.tz)

    return server


def _headers_key(ctx: Context) -> str | None:
    return key_from_headers(ctx.headers or {})


class HttpMcp:
    """``/mcp`` on ``serve``: the route and the session manager the app's lifespan runs."""

    def __init__(self, services_source: ServicesSource) -> None:
        self.server = build_server(services_source, _headers_key)
        # Stateless with JSON answers: no session lives in one process, so replicas behind a
        # balancer and ``serve --workers N`` answer any request. The key is checked on every
        # call; browsers are held back by the CORS origins, as for the rest of the API.
        self.server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = self.server.session_manager

    def app(self) -> ASGIApp:
        """The ASGI app answering ``/mcp`` (while :meth:`run` is running)."""
        return StreamableHTTPASGIApp(self.manager)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Keep the session manager running while the app serves. It runs in a task of its own:
        entered around the app's lifespan, its task group would wrap whatever the lifespan's
        body raises in an exception group."""
        up, stop = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            async with self.manager.run():
                up.set()
                await stop.wait()

        task = asyncio.create_task(hold(), name="mcp-session-manager")
        waiting = asyncio.create_task(up.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            waiting.cancel()
            task.result()  # raises why it could not start
        try:
            yield
        finally:
            stop.set()
            await task


def run_stdio(settings: Settings, api_key: str | None) -> int:
    """``worker-automation mcp``: the tools over stdin/stdout, acting with one operator key
    (``--api-key`` or ``WA_API_KEY``), checked before the server starts. Logs go to stderr."""
    key = api_key or settings.api_key
    if not key:
        print("error: an operator API key is needed: --api-key or WA_API_KEY", file=sys.stderr)
        return 2
    return asyncio.run(_serve_stdio(settings, key))


async def _serve_stdio(settings: Settings, key: str) -> int:
    services = await Services.start(settings)
    try:
        try:
            principal = await authenticate(services.db, key)
        except DomainError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 2

        async def the_services() -> Services:
            return services

        server = build_server(the_services, lambda _ctx: key)
        log.info("MCP tools on stdio, acting as key %s (%s)", principal.key_id, principal.perfil.value)
        await server.run_stdio_async()
    finally:
        await services.close()
    return 0
