"""The GraphQL schema in-process (SQLite, embedded broker): every query and mutation, the error
codes, the guards, and the cost of a page of jobs in SQL statements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, text

from tests.unit.graphql_support import Api, code, make_api
from worker_automation.resolvers import claims
from worker_automation.resolvers.clientes import add_cliente
from worker_automation.resolvers.machines import authenticate_machine
from worker_automation.resolvers.maintenance import PURGED_MESSAGE
from worker_automation.resolvers.services import Services
from worker_automation.schema import build_schema

WORKER_FIELDS = """
  id taskId clienteId usuarioId pathFile status dataInicio dataFim mensagemErro automationType queue
  priority retryCount progress metadataJson displayName clientName context result createdAt updatedAt
  machineId machine { id name status isOn createdAt lastClaimAt } cliente { id razaoSocial cnpj }
"""


@pytest.fixture
async def api(sqlite_services: Services) -> Api:
    return await make_api(sqlite_services)


async def register(api: Api, name: str, automation: str = "demo.echo") -> tuple[int, str]:
    data = await api.ok(
        "mutation($n: String!, $a: String) { registerMachine(name: $n, automation: $a) "
        "{ apiKey machine { id name automation status isOn } } }",
        {"n": name, "a": automation},
    )
    created = data["registerMachine"]
    assert created["machine"]["status"] == "LIGADO" and created["apiKey"].startswith("wmk_")
    return int(created["machine"]["id"]), str(created["apiKey"])


async def test_every_query_answers(api: Api) -> None:
    cliente = await add_cliente(api.services.db, razao_social="Comércio de Alimentos Ltda")
    _, machine_key = await register(api, "echo-1")
    running = await api.dispatch(clienteId=cliente.id, context={"x": 1})
    queued = await api.dispatch("demo.sleep", context={"seconds": 5}, priority=3)
    machine = await authenticate_machine(api.services.db, machine_key)
    await claims.claim(api.services, machine, running["id"])

    data = await api.ok(
        """
        query All($id: Int!, $task: String!) {
          workers(filter: {queue: "scan"}, page: 1, perPage: 5) { total page perPage pages items { WORKER } }
          worker(id: $id) { id status clientName machine { name } }
          stats { total byStatus byQueue statusCounts { key count } queueCounts { key count } }
          activeWorkers { id clientName }
          queuedWorkers(queue: "scan") { total items { id priority } }
          searchAutomations(q: "certidao trabalhista") {
            query count results { key score } byCategory { category } }
          everything: searchAutomations { count byCategory { category automations { key } } }
          queueLiveStatus { queues { queueName workersCount activeCount pendingCount capacity loadPercent
                                     activeTasks { id } pendingTasks { id } }
                            summary { totalActive totalPending totalCompletedToday totalErrorsToday } }
          brokerStatus { available queues queueLengths { key count } }
          workersInspect { available active reserved scheduled stats ping workers }
          taskStatus(taskId: $task) { taskId state status result workerId progress worker { id } }
          dashboard { stats { total } queues { queueName activeCount } summary { totalActive }
                      broker { available } active { id } queued { total items { id } } history { id } errors }
          automations { key displayName category queue requiresSelenium taskName maxConcurrentJobs devMode
                        enabled description form }
          machines { id name automation queue status isOn createdAt lastClaimAt }
          clientes { id razaoSocial cnpj }
        }
        """.replace("WORKER", WORKER_FIELDS),
        {"id": running["id"], "task": running["taskId"]},
    )
    page = data["workers"]
    assert (page["total"], page["page"], page["perPage"], page["pages"]) == (2, 1, 5, 1)
    newest, oldest = page["items"]
    assert newest["id"] == queued["id"] and newest["priority"] == 3 and newest["machine"] is None
    assert oldest["status"] == "EXECUTANDO" and oldest["clientName"] == "Comércio de Alimentos Ltda"
    assert oldest["cliente"]["razaoSocial"] == "Comércio de Alimentos Ltda"
    assert oldest["machine"]["name"] == "echo-1" and oldest["machine"]["lastClaimAt"]
    assert oldest["context"] == {"x": 1} and oldest["displayName"] == "Demonstração: Eco"
    assert oldest["dataInicio"].endswith("-03:00") and oldest["createdAt"].endswith("-03:00")
    assert data["worker"] == {"id": running["id"], "status": "EXECUTANDO", "clientName": cliente.razao_social,
                              "machine": {"name": "echo-1"}}  # fmt: skip
    stats = data["stats"]
    assert stats["total"] == 2 and stats["byStatus"]["EXECUTANDO"] == 1 and stats["byQueue"]["scan"] == 2
    assert {"key": "AGENDADO", "count": 1} in stats["statusCounts"]
    assert [w["id"] for w in data["activeWorkers"]] == [running["id"]]
    assert data["queuedWorkers"]["total"] == 1
    search = data["searchAutomations"]
    assert search["results"][0]["key"] == "certidao_trabalhista" and search["byCategory"] is None
    assert data["everything"]["count"] == len(data["automations"]) and data["everything"]["byCategory"]
    scan = next(q for q in data["queueLiveStatus"]["queues"] if q["queueName"] == "scan")
    assert (scan["activeCount"], scan["pendingCount"], scan["loadPercent"]) == (1, 1, 100.0)
    assert [t["id"] for t in scan["activeTasks"]] == [running["id"]]
    assert data["queueLiveStatus"]["summary"]["totalActive"] == 1
    assert data["brokerStatus"]["available"] is True and data["brokerStatus"]["queues"]["scan"] == 2
    assert data["workersInspect"]["available"] is False and data["workersInspect"]["workers"] == []
    task = data["taskStatus"]
    assert (task["state"], task["status"], task["workerId"], task["result"]) == (
        "STARTED", "STARTED", running["id"], None
    )  # fmt: skip
    board = data["dashboard"]
    assert board["errors"] == {} and board["stats"]["total"] == 2 and board["queued"]["total"] == 1
    assert [w["id"] for w in board["active"]] == [running["id"]]
    echo = next(a for a in data["automations"] if a["key"] == "demo.echo")
    assert echo["queue"] == "scan" and echo["form"]["allow_extra"] is True
    assert [m["name"] for m in data["machines"]] == ["echo-1"]
    assert data["clientes"] == [{"id": cliente.id, "razaoSocial": cliente.razao_social, "cnpj": None}]


async def test_job_mutations(api: Api) -> None:
    job = await api.dispatch("demo.sleep", context={"seconds": 1}, priority=5, usuarioId=7)
    assert job["status"] == "AGENDADO" and job["queue"] == "scan" and job["taskId"]

    reordered = await api.ok(
        "mutation($id: Int!) { reorderWorker(id: $id, newPriority: 1) { priority taskId } }",
        {"id": job["id"]},
    )
    assert reordered["reorderWorker"]["priority"] == 1
    assert reordered["reorderWorker"]["taskId"] != job["taskId"]
    moved = await api.ok(
        'mutation($id: Int!) { moveWorker(id: $id, targetQueue: "observer") { queue status } }',
        {"id": job["id"]},
    )
    assert moved["moveWorker"] == {"queue": "observer", "status": "AGENDADO"}
    cancelled = await api.ok(
        "mutation($id: Int!) { cancelWorker(id: $id) { status mensagemErro dataFim } }", {"id": job["id"]}
    )
    assert cancelled["cancelWorker"]["status"] == "CANCELADO" and cancelled["cancelWorker"]["dataFim"]
    retried = await api.ok(
        "mutation($id: Int!) { retryWorker(id: $id) { status retryCount usuarioId progress } }",
        {"id": job["id"]},
        caller="operator",
    )
    assert retried["retryWorker"] == {"status": "AGENDADO", "retryCount": 1, "usuarioId": 7, "progress": 0}

    invalid = await api.fails(
        'mutation { dispatchAutomation(input: {automationType: "demo.sleep", context: {}}) { id } }'
    )
    assert code(invalid) == "BAD_USER_INPUT" and (invalid.extensions or {})["field"] == "context.seconds"


async def test_maintenance_machine_and_settings_mutations(api: Api) -> None:
    await api.dispatch()
    await api.dispatch(clienteId=9999)
    cleaned = await api.ok("mutation { cleanupNoClient { deleted message } }")
    assert cleaned["cleanupNoClient"]["deleted"] == 2
    assert (await api.ok("{ workers { total } }"))["workers"]["total"] == 0
    again = await api.dispatch()
    orphans = await api.ok("mutation { syncOrphans { orphansFound totalChecked message } }")
    assert orphans["syncOrphans"]["totalChecked"] == 1
    cleared = await api.ok(
        'mutation { clearQueue(scope: QUEUED, queue: "scan") { cancelled scope queue message } }'
    )
    assert cleared["clearQueue"] == {
        "cancelled": 1, "scope": "QUEUED", "queue": "scan", "message": "1 worker(s) cancelado(s) com sucesso"
    }  # fmt: skip
    assert (await api.ok("query($id: Int!) { worker(id: $id) { status } }", {"id": again["id"]}))["worker"][
        "status"
    ] == "CANCELADO"

    # The purge discards both messages; only the job still queued is cancelled with its message.
    third = await api.dispatch()
    purged = await api.ok(
        'mutation { purgeQueue(queueName: "scan", confirm: true) '
        "{ queueName redisKeysDeleted cancelled message } }"
    )
    assert purged["purgeQueue"] == {
        "queueName": "scan", "redisKeysDeleted": 1, "cancelled": 1, "message": "Fila 'scan' purgada no broker"
    }  # fmt: skip
    ended = await api.ok("query($id: Int!) { worker(id: $id) { status mensagemErro } }", {"id": third["id"]})
    assert ended["worker"] == {"status": "CANCELADO", "mensagemErro": PURGED_MESSAGE}
    unconfirmed = await api.fails('mutation { purgeQueue(queueName: "scan") { queueName } }')
    assert code(unconfirmed) == "BAD_USER_INPUT" and "confirm" in unconfirmed.message

    machine_id, _ = await register(api, "pool-scan", automation="demo.sleep")
    off = await api.ok("mutation($id: Int!) { turnMachineOff(id: $id) { status isOn } }", {"id": machine_id})
    assert off["turnMachineOff"] == {"status": "DESLIGADO", "isOn": False}
    on = await api.ok("mutation($id: Int!) { turnMachineOn(id: $id) { status isOn } }", {"id": machine_id})
    assert on["turnMachineOn"] == {"status": "LIGADO", "isOn": True}
    duplicate = await api.fails('mutation { registerMachine(name: "pool-scan", queue: "scan") { apiKey } }')
    assert code(duplicate) == "CONFLICT"

    updated = await api.ok(
        'mutation { updateAutomationSettings(key: "demo.echo", maxConcurrentJobs: 3, devMode: true) '
        "{ key maxConcurrentJobs devMode enabled } }"
    )
    assert updated["updateAutomationSettings"] == {
        "key": "demo.echo", "maxConcurrentJobs": 3, "devMode": True, "enabled": True
    }  # fmt: skip
    listed = await api.ok("{ automations { key maxConcurrentJobs devMode } }")
    assert {"key": "demo.echo", "maxConcurrentJobs": 3, "devMode": True} in listed["automations"]
    unknown = await api.fails('mutation { updateAutomationSettings(key: "nope", enabled: false) { key } }')
    assert code(unknown) == "NOT_FOUND"


async def test_permissions_and_error_codes(api: Api) -> None:
    job = await api.dispatch()
    missing = await api.fails("{ stats { total } }", caller=None)
    assert (code(missing), missing.message) == ("UNAUTHENTICATED", "API Key ausente.")
    assert code(await api.fails("{ stats { total } }", caller="wak_not-a-key")) == "UNAUTHENTICATED"
    bearer = await api.run(
        "{ stats { total } }", caller=None, headers={"Authorization": f"Bearer {api.keys['reader']}"}
    )
    assert bearer.errors is None and bearer.data == {"stats": {"total": 1}}

    cancel = "mutation($id: Int!) { cancelWorker(id: $id) { status } }"
    for mutation in (cancel, 'mutation { dispatchAutomation(input: {automationType: "demo.echo"}) { id } }'):
        refused = await api.fails(mutation, {"id": job["id"]} if "$id" in mutation else None, caller="reader")
        assert code(refused) == "FORBIDDEN" and "worker_automation:write" in refused.message
    maintenance = (
        "mutation { clearQueue { cancelled } }",
        'mutation { purgeQueue(queueName: "scan", confirm: true) { queueName } }',
        "mutation { cleanupNoClient { deleted } }",
        "mutation { syncOrphans { orphansFound } }",
        'mutation { registerMachine(name: "m", queue: "scan") { apiKey } }',
        "mutation { turnMachineOn(id: 1) { id } }",
        "mutation { turnMachineOff(id: 1) { id } }",
        'mutation { updateAutomationSettings(key: "demo.echo", enabled: false) { key } }',
    )
    for mutation in maintenance:
        refused = await api.fails(mutation, caller="operator")
        assert (code(refused), refused.message) == (
            "FORBIDDEN",
            "Operacao exige perfil administrador ou diretoria.",
        )
    assert (await api.ok(cancel, {"id": job["id"]}, caller="operator"))["cancelWorker"][
        "status"
    ] == "CANCELADO"

    conflict = await api.fails(cancel, {"id": job["id"]})
    assert code(conflict) == "CONFLICT" and "CANCELADO" in conflict.message
    assert code(await api.fails(cancel, {"id": 424242})) == "NOT_FOUND"
    bad = await api.fails("mutation { reorderWorker(id: 1, newPriority: 42) { id } }")
    assert code(bad) == "BAD_USER_INPUT" and (bad.extensions or {})["field"] == "new_priority"
    unknown_queue = await api.fails('{ workers(filter: {queue: "nope"}) { total } }')
    assert code(unknown_queue) == "BAD_USER_INPUT" and (unknown_queue.extensions or {})["field"] == "queue"
    # A worker machine's key is not an operator key.
    _, machine_key = await register(api, "echo-m")
    as_machine = await api.fails(
        "{ stats { total } }", caller=None, headers={"X-Worker-Api-Key": machine_key}
    )
    assert code(as_machine) == "UNAUTHENTICATED"


async def test_unexpected_errors_are_masked(api: Api) -> None:
    async with api.services.db.engine.begin() as conn:
        await conn.execute(text("DROP TABLE clientes"))
    result = await api.run("{ clientes { id } }")
    assert result.errors is not None and len(result.errors) == 1
    error = result.errors[0].formatted
    assert error["message"] == "Erro interno" and error["extensions"] == {"code": "INTERNAL_SERVER_ERROR"}
    assert "Traceback" not in str(error) and "sqlite" not in str(error).lower()


async def test_guards_refuse_with_clear_messages(api: Api) -> None:
    aliases = " ".join(f"a{i}: stats {{ total }}" for i in range(31))
    for _ in range(2):  # parsed documents are cached: a refused one stays refused
        refused = await api.fails(f"{{ {aliases} }}")
        assert refused.message == "31 aliases found. Allowed: 30"
        assert code(refused) == "GRAPHQL_VALIDATION_FAILED"
    for _ in range(2):
        broken = await api.fails("{ stats { total }")
        assert code(broken) == "GRAPHQL_PARSE_FAILED" and "Syntax Error" in broken.message

    padding = "#" + "x" * 25_000 + "\n"
    oversized = await api.fails(padding + "{ stats { total } }")
    assert oversized.message.startswith("Documento GraphQL grande demais") and "20000" in oversized.message

    tokens = await api.fails("{ " + " ".join("stats { total }" for _ in range(600)) + " }")
    assert "more than 2000 tokens" in tokens.message and code(tokens) == "GRAPHQL_PARSE_FAILED"

    shallow = build_schema(api.services.settings.model_copy(update={"max_query_depth": 3}))
    deep = await shallow.execute(
        "query Deep { dashboard { queued { items { machine { id } } } } }", context_value=api.context()
    )
    assert deep.errors and deep.errors[0].message == "'Deep' exceeds maximum operation depth of 3"
    assert deep.data is None

    introspection = "{ __schema { queryType { name } } }"
    assert (await api.ok(introspection))["__schema"]["queryType"]["name"] == "Query"
    closed = build_schema(api.services.settings.model_copy(update={"introspection": False}))
    hidden = await closed.execute(introspection, context_value=api.context())
    assert hidden.errors and "introspection" in hidden.errors[0].message.lower()


@contextmanager
def counting_statements(services: Services) -> Iterator[list[str]]:
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    engine = services.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def test_a_page_of_workers_costs_a_constant_number_of_statements(api: Api) -> None:
    from worker_automation.models import Job, JobStatus

    clientes = [await add_cliente(api.services.db, razao_social=f"Cliente {i}") for i in range(10)]
    machine_ids = [(await register(api, f"m{i}"))[0] for i in range(10)]
    async with api.services.db.session() as session:
        for i in range(120):
            session.add(
                Job(
                    automation_type="demo.echo", queue="scan", status=JobStatus.EXECUTANDO.value,
                    cliente_id=clientes[i % 10].id, machine_id=machine_ids[i % 10],
                )
            )  # fmt: skip
    query = """query($n: Int!) { workers(perPage: $n) { items { id clientName displayName
               cliente { razaoSocial } machine { name status } } } }"""
    await api.ok(query, {"n": 1})  # the key's last-use stamp is written once, not per page

    costs = {}
    for size in (10, 100):
        with counting_statements(api.services) as statements:
            data = await api.ok(query, {"n": size})
        assert len(data["workers"]["items"]) == size
        assert all(
            item["machine"]["name"] and item["cliente"]["razaoSocial"] for item in data["workers"]["items"]
        )
        costs[size] = len(statements)
    assert costs[10] == costs[100] <= 6, costs


async def _running_jobs_on_machines(api: Api, count: int) -> None:
    from worker_automation.models import Job, JobStatus

    clientes = [await add_cliente(api.services.db, razao_social=f"Loja {i}") for i in range(count)]
    machine_ids = [(await register(api, f"batch-{i}"))[0] for i in range(count)]
    async with api.services.db.session() as session:
        for i in range(count):
            session.add(
                Job(
                    automation_type="demo.echo", queue="scan", status=JobStatus.EXECUTANDO.value,
                    cliente_id=clientes[i].id, machine_id=machine_ids[i],
                )
            )  # fmt: skip


def _lookups(statements: list[str], table: str) -> int:
    """Statements that read ``table`` alone (the loaders' batched lookups, not the list joins)."""
    return sum(1 for s in statements if f"FROM {table}" in s and "workers" not in s)


async def test_sibling_fields_and_list_items_share_one_loader(api: Api) -> None:
    await _running_jobs_on_machines(api, 4)
    query = """{ a: workers { items { cliente { razaoSocial } machine { name } } }
                 b: activeWorkers { cliente { razaoSocial } machine { name } } }"""
    await api.ok(query)  # the key's last-use stamp is written once, not here
    with counting_statements(api.services) as statements:
        data = await api.ok(query)
    assert len(data["a"]["items"]) == len(data["b"]) == 4
    assert _lookups(statements, "clientes") == 1, statements
    assert _lookups(statements, "machines") == 1, statements


async def test_a_subscription_payload_loads_with_one_loader(api: Api) -> None:
    from tests.unit.graphql_support import subscribed

    await _running_jobs_on_machines(api, 4)
    query = "subscription { queueLoad { queues { queueName activeTasks { id machine { name } } } } }"
    with counting_statements(api.services) as statements:
        async with subscribed(api, query) as sub:
            data = await sub.data()
    tasks = [t for q in data["queueLoad"]["queues"] for t in q["activeTasks"]]
    assert len(tasks) == 4 and all(t["machine"]["name"] for t in tasks)
    assert _lookups(statements, "machines") == 1, statements
