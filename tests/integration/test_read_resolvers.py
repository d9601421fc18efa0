"""Read resolvers on SQLite and real PostgreSQL: filters, pages, order, stats, task status, enrichment."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, literal, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.util import greenlet_spawn

from tests.support.pools import checked_out
from tests.support.reads import list_jobs_after, recent_terminal
from tests.support.settings import MakeSettings
from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.domain.errors import BadInput, NotFound
from worker_automation.domain.shapes import as_dict
from worker_automation.models import Cliente, Job, JobStatus
from worker_automation.models.database import Database, driver_statement
from worker_automation.models.migrate import migrate
from worker_automation.resolvers.job_filter import JobFilter
from worker_automation.resolvers.reads import (
    MSG_JOB_NOT_FOUND,
    _list_statements,
    active_jobs,
    get_job,
    list_job_items,
    list_jobs,
    queued_jobs,
    stats,
    task_status_from_db,
)
from worker_automation.settings import DEFAULT_QUEUES

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
QUEUES = dict(DEFAULT_QUEUES)
BATCH = 50

PADARIA = 1
METALURGICA = 2
MISSING_CLIENT = 999


@pytest.fixture
async def db(database_url: str, make_settings: MakeSettings) -> AsyncIterator[Database]:
    await migrate(database_url)
    database = Database(make_settings(database_url, None))
    try:
        yield database
    finally:
        await database.close()


def job(n: int, **overrides: Any) -> dict[str, Any]:
    """A complete job row (every column given, so batched inserts share one shape)."""
    created = T0 + timedelta(minutes=n)
    row: dict[str, Any] = {
        "task_id": f"task-{n:05d}-{uuid.uuid4().hex[:8]}",
        "cliente_id": PADARIA,
        "usuario_id": 10,
        "path_file": None,
        "status": JobStatus.AGENDADO.value,
        "data_inicio": None,
        "data_fim": None,
        "mensagem_erro": None,
        "automation_type": "cnd_federal",
        "queue": "certidao",
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "metadata_json": None,
        "context": {"cnpj": "11222333000181"},
        "result": None,
        "created_at": created,
        "updated_at": created,
        "machine_id": None,
    }
    row.update(overrides)
    return row


async def insert_rows(db: Database, rows: list[dict[str, Any]]) -> list[int]:
    """Insert in batches; returns the new ids in insertion order."""
    async with db.session() as session:
        for start in range(0, len(rows), BATCH):
            await session.execute(insert(Job), rows[start : start + BATCH])
        task_ids = [r["task_id"] for r in rows]
    async with db.session() as session:
        result = await session.execute(select(Job.task_id, Job.id))
        by_task = {t: i for t, i in result.all()}
    return [by_task[t] for t in task_ids]


async def add_clients(db: Database) -> None:
    async with db.session() as session:
        await session.execute(
            insert(Cliente),
            [
                {
                    "id": PADARIA,
                    "razao_social": "Padaria Pão Dourado Ltda",
                    "cnpj": "11222333000181",
                    "created_at": T0,
                },
                {
                    "id": METALURGICA,
                    "razao_social": "Metalúrgica Aço Forte S.A.",
                    "cnpj": None,
                    "created_at": T0,
                },
            ],
        )


@pytest.fixture
async def mixed(db: Database) -> dict[str, int]:
    """A small, fully known set of rows: name -> id."""
    await add_clients(db)
    spec: list[tuple[str, dict[str, Any]]] = [
        ("agendado_cnd", {}),
        (
            "executando_simples",
            {
                "status": "EXECUTANDO",
                "automation_type": "simples_nacional",
                "queue": "scraping",
                "cliente_id": METALURGICA,
                "usuario_id": 20,
                "data_inicio": T0 + timedelta(hours=1),
                "progress": 40,
            },
        ),
        (
            "concluido_scan",
            {
                "status": "CONCLUIDO",
                "automation_type": "scan_integridade_dados",
                "queue": "scan",
                "data_inicio": T0,
                "data_fim": T0 + timedelta(hours=2),
                "progress": 100,
                "result": {"certidao_id": 7},
            },
        ),
        (
            "falha_dou",
            {
                "status": "FALHA",
                "automation_type": "observer_dou",
                "queue": "observer",
                "cliente_id": METALURGICA,
                "data_inicio": T0,
                "data_fim": T0 + timedelta(hours=3),
                "mensagem_erro": "Captcha nao resolvido",
            },
        ),
        (
            "cancelado_ui",
            {
                "status": "CANCELADO",
                "automation_type": "ui_emissao_guia_das",
                "queue": "ui_automation",
                "cliente_id": None,
                "usuario_id": 20,
                "data_fim": T0 + timedelta(hours=1),
                "mensagem_erro": "Cancelado pelo operador",
            },
        ),
        (
            "orfao_falencia",
            {
                "automation_type": "certidao_falencia",
                "cliente_id": MISSING_CLIENT,
            },
        ),
    ]
    rows = [job(i, **overrides) for i, (_, overrides) in enumerate(spec)]
    ids = await insert_rows(db, rows)
    return {name: ids[i] for i, (name, _) in enumerate(spec)}


async def ids_of(db: Database, filters: JobFilter, **page: Any) -> list[int]:
    result = await list_jobs(db, QUEUES, filters, **page)
    return [w.id for w in result.items]


# --- list_workers: filters -------------------------------------------------------------------


async def test_no_filter_lists_every_row_newest_first(db: Database, mixed: dict[str, int]) -> None:
    result = await list_jobs(db, QUEUES, JobFilter())

    assert result.total == len(mixed)
    assert [w.id for w in result.items] == sorted(mixed.values(), reverse=True)


async def test_filter_by_status(db: Database, mixed: dict[str, int]) -> None:
    assert await ids_of(db, JobFilter(status="EXECUTANDO")) == [mixed["executando_simples"]]
    assert await ids_of(db, JobFilter(status="agendado")) == sorted(
        [mixed["agendado_cnd"], mixed["orfao_falencia"]], reverse=True
    )
    assert await ids_of(db, JobFilter(status="CONCLUIDO")) == [mixed["concluido_scan"]]


async def test_filter_by_queue(db: Database, mixed: dict[str, int]) -> None:
    assert await ids_of(db, JobFilter(queue="scan")) == [mixed["concluido_scan"]]
    assert await ids_of(db, JobFilter(queue="certidao")) == sorted(
        [mixed["agendado_cnd"], mixed["orfao_falencia"]], reverse=True
    )


async def test_filter_by_automation_type(db: Database, mixed: dict[str, int]) -> None:
    assert await ids_of(db, JobFilter(automation_type="observer_dou")) == [mixed["falha_dou"]]


async def test_filter_by_cliente_and_usuario(db: Database, mixed: dict[str, int]) -> None:
    assert await ids_of(db, JobFilter(cliente_id=METALURGICA)) == sorted(
        [mixed["executando_simples"], mixed["falha_dou"]], reverse=True
    )
    assert await ids_of(db, JobFilter(usuario_id=20)) == sorted(
        [mixed["executando_simples"], mixed["cancelado_ui"]], reverse=True
    )
    assert await ids_of(db, JobFilter(cliente_id=METALURGICA, usuario_id=20)) == [mixed["executando_simples"]]


async def test_filter_by_task_id(db: Database, mixed: dict[str, int]) -> None:
    target = await get_job(db, mixed["falha_dou"])
    assert target.task_id is not None

    assert await ids_of(db, JobFilter(task_id=target.task_id)) == [mixed["falha_dou"]]
    assert await ids_of(db, JobFilter(task_id="no-such-task")) == []


async def test_filters_combine(db: Database, mixed: dict[str, int]) -> None:
    assert await ids_of(db, JobFilter(status="FALHA", queue="observer", cliente_id=METALURGICA)) == [
        mixed["falha_dou"]
    ]
    assert await ids_of(db, JobFilter(status="FALHA", queue="scan")) == []


async def test_q_matches_client_name(db: Database, mixed: dict[str, int]) -> None:
    expected = sorted([mixed["executando_simples"], mixed["falha_dou"]], reverse=True)

    assert await ids_of(db, JobFilter(q="forte")) == expected
    assert await ids_of(db, JobFilter(q="  FORTE  ")) == expected
    padaria = await ids_of(db, JobFilter(q="padaria"))
    assert set(padaria) == {mixed["agendado_cnd"], mixed["concluido_scan"]}


async def test_q_matches_accented_client_name_in_any_case(db: Database) -> None:
    async with db.session() as session:
        await session.execute(
            insert(Cliente), [{"id": 5, "razao_social": "Óptica Visão Clara", "cnpj": None, "created_at": T0}]
        )
    [job_id] = await insert_rows(db, [job(0, cliente_id=5)])

    assert await ids_of(db, JobFilter(q="óptica")) == [job_id]
    assert await ids_of(db, JobFilter(q="ÓPTICA VISÃO")) == [job_id]
    # Accents are ignored both ways: what operators type rarely carries them.
    assert await ids_of(db, JobFilter(q="optica visao")) == [job_id]


async def test_q_ignores_accents_in_error_messages_and_automation_names(db: Database) -> None:
    [failed] = await insert_rows(db, [job(0, mensagem_erro="Certidão positiva: há pendências")])
    assert await ids_of(db, JobFilter(q="certidao positiva")) == [failed]
    assert await ids_of(db, JobFilter(q="PENDÊNCIAS")) == [failed]


async def test_q_matches_automation_display_name(db: Database, mixed: dict[str, int]) -> None:
    # Display names come from the registry, not from the table.
    assert "Simples Nacional" in AUTOMATION_REGISTRY["simples_nacional"].display_name
    assert await ids_of(db, JobFilter(q="Simples Nacional")) == [mixed["executando_simples"]]
    assert await ids_of(db, JobFilter(q="diário oficial")) == [mixed["falha_dou"]]
    assert await ids_of(db, JobFilter(q="falência")) == [mixed["orfao_falencia"]]


async def test_q_matches_its_text_as_typed_wildcards_ordinals_and_backslashes_included(db: Database) -> None:
    ordinal, underscore, near_miss, backslash, no_backslash = await insert_rows(
        db,
        [
            job(0, context={"processo": "1ª Vara Cível, Nº 42"}),
            job(1, context={"arquivo": "relatorio_final"}, mensagem_erro="falhou em 100% dos casos"),
            job(2, context={"arquivo": "relatorioXfinal"}, mensagem_erro="falhou em 100 casos"),
            job(3, context={"caminho": "C:\\dados\\saida"}),
            job(4, context={"caminho": "C:dados"}),
        ],
    )
    # Letters no accent folds away read the same on both databases.
    assert await ids_of(db, JobFilter(q="1ª Vara")) == [ordinal]
    assert await ids_of(db, JobFilter(q="nº 42")) == [ordinal]
    assert await ids_of(db, JobFilter(q="vara civel")) == [ordinal]
    # % and _ are the characters typed, not wildcards; a backslash is one too.
    assert await ids_of(db, JobFilter(q="relatorio_final")) == [underscore]
    assert await ids_of(db, JobFilter(q="100%")) == [underscore]
    assert await ids_of(db, JobFilter(q="C:\\dados")) == [backslash]
    assert near_miss not in await ids_of(db, JobFilter(q="o_f"))
    assert no_backslash not in await ids_of(db, JobFilter(q="\\d"))


async def test_q_matching_nothing_is_empty(db: Database, mixed: dict[str, int]) -> None:
    result = await list_jobs(db, QUEUES, JobFilter(q="zzz-nada-disso"))

    assert result.items == [] and result.total == 0


# One database serves every case: each case is a separate call that must fail on its own.
BAD_FILTERS = [
    (JobFilter(status="RODANDO"), "status"),
    (JobFilter(queue="fila_inexistente"), "queue"),
    (JobFilter(automation_type="nao_existe"), "automation_type"),
    (JobFilter(status="CONCLUIDO", queue="fila_inexistente"), "queue"),
]


async def test_unknown_filter_value_is_bad_input_naming_the_field(
    db: Database, mixed: dict[str, int]
) -> None:
    for filters, field in BAD_FILTERS:
        with pytest.raises(BadInput) as caught:
            await list_jobs(db, QUEUES, filters)

        assert caught.value.field == field, filters
        assert field in caught.value.message, filters


# --- list_workers: pagination ----------------------------------------------------------------


@pytest.fixture
async def many(db: Database) -> list[int]:
    """137 rows, ids in insertion order."""
    return await insert_rows(db, [job(i) for i in range(137)])


async def test_pagination_arithmetic(db: Database, many: list[int]) -> None:
    newest_first = sorted(many, reverse=True)

    first = await list_jobs(db, QUEUES, JobFilter(), page=1, per_page=20)
    assert (first.total, first.page, first.per_page, first.pages) == (137, 1, 20, 7)
    assert [w.id for w in first.items] == newest_first[:20]

    last = await list_jobs(db, QUEUES, JobFilter(), page=7, per_page=20)
    assert (last.total, last.pages, len(last.items)) == (137, 7, 17)
    assert [w.id for w in last.items] == newest_first[120:]

    seen: list[int] = []
    for number in range(1, 8):
        seen += [w.id for w in (await list_jobs(db, QUEUES, JobFilter(), number, 20)).items]
    assert seen == newest_first


async def test_defaults_are_page_one_of_twenty(db: Database, many: list[int]) -> None:
    result = await list_jobs(db, QUEUES, JobFilter())

    assert (result.page, result.per_page, result.pages, len(result.items)) == (1, 20, 7, 20)


async def test_page_past_the_end_is_empty_with_the_right_total(db: Database, many: list[int]) -> None:
    result = await list_jobs(db, QUEUES, JobFilter(), page=8, per_page=20)

    assert result.items == []
    assert (result.total, result.page, result.pages) == (137, 8, 7)


async def test_per_page_is_capped_at_100(db: Database, many: list[int]) -> None:
    result = await list_jobs(db, QUEUES, JobFilter(), page=1, per_page=500)

    assert result.per_page == 100
    assert len(result.items) == 100
    assert result.pages == 2
    second = await list_jobs(db, QUEUES, JobFilter(), page=2, per_page=500)
    assert len(second.items) == 37


async def test_empty_table_has_zero_pages(db: Database) -> None:
    result = await list_jobs(db, QUEUES, JobFilter())

    assert (result.items, result.total, result.pages) == ([], 0, 0)


BAD_PAGES = [(0, 20, "page"), (-1, 20, "page"), (1, 0, "per_page"), (1, -5, "per_page"), (0, 0, "page")]


async def test_bad_page_numbers_name_the_field(db: Database, many: list[int]) -> None:
    for page, per_page, field in BAD_PAGES:
        with pytest.raises(BadInput) as caught:
            await list_jobs(db, QUEUES, JobFilter(), page=page, per_page=per_page)

        assert caught.value.field == field, (page, per_page)
        assert field in caught.value.message, (page, per_page)


async def test_newest_first_is_by_creation(db: Database, many: list[int]) -> None:
    result = await list_jobs(db, QUEUES, JobFilter(), page=1, per_page=100)

    created = [w.created_at for w in result.items]
    assert created == sorted(created, reverse=True)
    assert result.items[0].id == max(many)


# --- detail, active, queued, recent ----------------------------------------------------------


async def test_get_job_found(db: Database, mixed: dict[str, int]) -> None:
    view = await get_job(db, mixed["executando_simples"])

    assert view.id == mixed["executando_simples"]
    assert view.status == "EXECUTANDO"
    assert view.queue == "scraping"
    assert view.progress == 40
    assert view.data_inicio == T0 + timedelta(hours=1)
    assert view.data_inicio is not None and view.data_inicio.tzinfo is not None
    assert view.context == {"cnpj": "11222333000181"}


async def test_get_job_not_found(db: Database, mixed: dict[str, int]) -> None:
    with pytest.raises(NotFound) as caught:
        await get_job(db, 987654)

    assert caught.value.message == MSG_JOB_NOT_FOUND == "Worker nao encontrado."


async def test_active_workers_are_the_running_rows_longest_first(db: Database) -> None:
    ids = await insert_rows(
        db,
        [
            job(0, status="EXECUTANDO", data_inicio=T0 + timedelta(minutes=30)),
            job(1, status="EXECUTANDO", data_inicio=T0 + timedelta(minutes=5)),
            job(2, status="AGENDADO"),
            job(3, status="CONCLUIDO", data_inicio=T0, data_fim=T0 + timedelta(minutes=1)),
            job(4, status="EXECUTANDO", data_inicio=T0 + timedelta(minutes=10)),
        ],
    )

    active = await active_jobs(db)

    assert [w.id for w in active] == [ids[1], ids[4], ids[0]]
    assert all(w.status == "EXECUTANDO" for w in active)
    assert [w.id for w in await active_jobs(db, limit=2)] == [ids[1], ids[4]]


async def test_queued_workers_run_order_is_priority_then_age(db: Database) -> None:
    ids = await insert_rows(
        db,
        [
            job(0, priority=5),
            job(1, priority=0, queue="scan", automation_type="scan_integridade_dados"),
            job(2, priority=5, created_at=T0 - timedelta(days=1)),
            job(3, priority=9),
            job(4, priority=0),
            job(5, status="EXECUTANDO", priority=0, data_inicio=T0),
            job(6, status="FALHA", priority=0, data_fim=T0),
        ],
    )

    queued = await queued_jobs(db, QUEUES)

    assert [w.id for w in queued.items] == [ids[1], ids[4], ids[2], ids[0], ids[3]]
    assert queued.total == 5
    assert queued.per_page == 10


async def test_queued_jobs_queue_filter_and_pages(db: Database) -> None:
    rows = [job(i, priority=i % 3) for i in range(12)]
    rows += [job(100 + i, queue="scan", automation_type="scan_integridade_dados") for i in range(3)]
    ids = await insert_rows(db, rows)

    scan = await queued_jobs(db, QUEUES, queue="scan")
    assert [w.id for w in scan.items] == ids[12:]

    first = await queued_jobs(db, QUEUES, page=1, per_page=5, queue="certidao")
    third = await queued_jobs(db, QUEUES, page=3, per_page=5, queue="certidao")
    assert (first.total, first.pages, len(third.items)) == (12, 3, 2)
    assert [w.priority for w in first.items] == [0, 0, 0, 0, 1]

    with pytest.raises(BadInput) as caught:
        await queued_jobs(db, QUEUES, queue="nope")
    assert caught.value.field == "queue"


async def test_recent_terminal_is_ended_rows_newest_end_first(db: Database) -> None:
    ids = await insert_rows(
        db,
        [
            job(0, status="CONCLUIDO", data_fim=T0 + timedelta(hours=1)),
            job(1, status="FALHA", data_fim=T0 + timedelta(hours=3)),
            job(2, status="CANCELADO", data_fim=T0 + timedelta(hours=2)),
            job(3, status="EXECUTANDO", data_inicio=T0),
            job(4, status="AGENDADO"),
        ],
    )

    recent = await recent_terminal(db)

    assert [w.id for w in recent] == [ids[1], ids[2], ids[0]]
    assert [w.id for w in await recent_terminal(db, limit=1)] == [ids[1]]


# --- stats ------------------------------------------------------------------------------------


async def test_stats_on_empty_table_lists_every_status_and_queue_with_zero(db: Database) -> None:
    result = await stats(db, QUEUES)

    assert result.total == 0
    assert result.by_status == {s.value: 0 for s in JobStatus}
    assert result.by_queue == dict.fromkeys(QUEUES, 0)
    assert set(result.by_queue) == {"certidao", "scraping", "scan", "observer", "ui_automation"}


async def test_stats_counts(db: Database, mixed: dict[str, int]) -> None:
    result = await stats(db, QUEUES)

    assert result.total == 6
    assert result.by_status == {
        "AGENDADO": 2,
        "EXECUTANDO": 1,
        "CONCLUIDO": 1,
        "FALHA": 1,
        "CANCELADO": 1,
    }
    assert result.by_queue == {"certidao": 2, "scraping": 1, "scan": 1, "observer": 1, "ui_automation": 1}
    assert as_dict(result) == {"total": 6, "by_status": result.by_status, "by_queue": result.by_queue}


async def test_stats_uses_the_configured_queues(db: Database) -> None:
    await insert_rows(db, [job(0, queue="scan"), job(1, queue="scan")])

    result = await stats(db, {"scan": 1, "extra": 4})

    assert result.by_queue == {"scan": 2, "extra": 0}
    assert result.total == 2


# --- task status ------------------------------------------------------------------------------


CELERY_STATES = {
    "AGENDADO": "PENDING",
    "EXECUTANDO": "STARTED",
    "CONCLUIDO": "SUCCESS",
    "FALHA": "FAILURE",
    "CANCELADO": "REVOKED",
}


async def test_task_state_mapping(db: Database) -> None:
    ids = await insert_rows(
        db, [job(i, status=status, task_id=f"map-{status}") for i, status in enumerate(CELERY_STATES)]
    )

    for (status, state), job_id in zip(CELERY_STATES.items(), ids, strict=True):
        found = await task_status_from_db(db, f"map-{status}")

        assert found is not None, status
        assert found.state == state
        assert found.as_dict()["status"] == state
        assert found.as_dict()["worker_id"] == job_id
        if status in ("AGENDADO", "EXECUTANDO"):
            assert found.result is None
        if status == "CANCELADO":
            assert found.result is not None and found.result["exc_type"]


async def test_task_success_carries_the_result_object(db: Database) -> None:
    await insert_rows(
        db,
        [
            job(0, status="CONCLUIDO", task_id="ok-dict", result={"slept": 2}, progress=100),
            job(1, status="CONCLUIDO", task_id="ok-scalar", result=42),
        ],
    )

    found = await task_status_from_db(db, "ok-dict")
    assert found is not None and found.result == {"slept": 2}
    assert found.as_dict()["progress"] == 100
    scalar = await task_status_from_db(db, "ok-scalar")
    assert scalar is not None and scalar.result == {"value": 42}


async def test_task_failure_carries_exc_type_and_message(db: Database) -> None:
    await insert_rows(
        db,
        [
            job(
                0,
                status="FALHA",
                task_id="fail-stored",
                mensagem_erro="Portal fora do ar",
                result={"exc_type": "PortalError", "exc_message": "Portal fora do ar", "traceback": None},
            ),
            job(1, status="FALHA", task_id="fail-bare", mensagem_erro="Sessao expirada", result=None),
        ],
    )

    stored = await task_status_from_db(db, "fail-stored")
    assert stored is not None and stored.result is not None
    assert (stored.result["exc_type"], stored.result["exc_message"]) == ("PortalError", "Portal fora do ar")
    bare = await task_status_from_db(db, "fail-bare")
    assert bare is not None and bare.result is not None
    assert bare.result["exc_message"] == "Sessao expirada"
    assert bare.result["exc_type"]


async def test_unknown_task_id_is_none(db: Database, mixed: dict[str, int]) -> None:
    assert await task_status_from_db(db, str(uuid.uuid4())) is None


async def test_blank_task_id_is_bad_input(db: Database) -> None:
    with pytest.raises(BadInput) as caught:
        await task_status_from_db(db, "   ")
    assert caught.value.field == "task_id"


# --- enrichment -------------------------------------------------------------------------------


async def test_rows_carry_display_name_and_client_name(db: Database, mixed: dict[str, int]) -> None:
    views = {w.id: w for w in (await list_jobs(db, QUEUES, JobFilter())).items}

    simples = views[mixed["executando_simples"]]
    assert simples.display_name == AUTOMATION_REGISTRY["simples_nacional"].display_name
    assert simples.client_name == "Metalúrgica Aço Forte S.A."
    assert views[mixed["agendado_cnd"]].client_name == "Padaria Pão Dourado Ltda"
    assert views[mixed["agendado_cnd"]].display_name == AUTOMATION_REGISTRY["cnd_federal"].display_name


async def test_missing_client_gives_no_name_but_the_row_is_listed(
    db: Database, mixed: dict[str, int]
) -> None:
    views = {w.id: w for w in (await list_jobs(db, QUEUES, JobFilter())).items}

    orphan = views[mixed["orfao_falencia"]]
    assert orphan.cliente_id == MISSING_CLIENT
    assert orphan.client_name is None
    no_client = views[mixed["cancelado_ui"]]
    assert no_client.cliente_id is None and no_client.client_name is None
    detail = await get_job(db, mixed["orfao_falencia"])
    assert detail.client_name is None
    assert await ids_of(db, JobFilter(cliente_id=MISSING_CLIENT)) == [mixed["orfao_falencia"]]


async def test_unregistered_automation_shows_its_key(db: Database) -> None:
    [job_id] = await insert_rows(db, [job(0, automation_type="automacao_aposentada")])

    view = await get_job(db, job_id)

    assert view.display_name == "automacao_aposentada"


async def test_rest_item_has_the_documented_keys_and_local_offsets(
    db: Database, mixed: dict[str, int]
) -> None:
    from zoneinfo import ZoneInfo

    view = await get_job(db, mixed["concluido_scan"])
    item = view.rest_item(ZoneInfo("America/Sao_Paulo"))

    assert list(item)[:3] == ["id", "task_id", "cliente_id"]
    assert item["display_name"] == AUTOMATION_REGISTRY["scan_integridade_dados"].display_name
    assert item["client_name"] == "Padaria Pão Dourado Ltda"
    assert item["data_fim"] == "2026-03-02T11:00:00-03:00"


async def test_a_list_statement_reads_the_same_rows_through_the_driver(
    db: Database, mixed: dict[str, int]
) -> None:
    rows_q, _ = _list_statements(("status",), with_text=False, total="counters")
    parameters = {"filter_status": "CONCLUIDO", "page_offset": 0, "page_size": 100}
    async with db.connection() as conn:
        through_sqlalchemy = [tuple(row) for row in (await conn.execute(rows_q, parameters)).all()]
    assert through_sqlalchemy
    assert [tuple(row) for row in await db.rows(rows_q, parameters)] == through_sqlalchemy
    # On PostgreSQL the driver ran it; SQLite always takes SQLAlchemy's path.
    plan = driver_statement(db.engine, rows_q)
    assert (plan is not None) is (db.dialect == "postgresql")


async def test_a_literal_rendered_at_execution_leaves_the_statement_to_sqlalchemy(
    db: Database, mixed: dict[str, int]
) -> None:
    """SQLAlchemy writes such a literal into the text as each execution starts: the driver, given
    the compiled text, would fail on its placeholder every time before the read ran again."""
    statement = select(Job.id).where(Job.status == literal("CONCLUIDO", literal_execute=True))
    assert driver_statement(db.engine, statement) is None
    async with db.connection() as conn:
        expected = [tuple(row) for row in (await conn.execute(statement)).all()]
    assert expected
    assert [tuple(row) for row in await db.rows(statement, {})] == expected


async def test_a_failing_list_statement_is_reported_as_sqlalchemy_reports_it(
    db: Database, mixed: dict[str, int]
) -> None:
    if db.dialect != "postgresql":
        pytest.skip("the driver's own path is PostgreSQL's")
    rows_q, _ = _list_statements(("status",), with_text=False, total="counters")
    # (PostgreSQL refuses a negative OFFSET; the driver's error is run again through SQLAlchemy.)
    with pytest.raises(DBAPIError):
        await db.rows(rows_q, {"filter_status": "CONCLUIDO", "page_offset": -1, "page_size": 20})
    assert checked_out(db.engine) == 0


async def test_driver_reads_hand_every_connection_back(db: Database, mixed: dict[str, int]) -> None:
    rows_q, _ = _list_statements(("status",), with_text=False, total="counters")
    parameters = {"filter_status": "CONCLUIDO", "page_offset": 0, "page_size": 5}
    for _ in range(30):
        assert await db.rows(rows_q, parameters)
    assert checked_out(db.engine) == 0


async def test_a_pooled_connection_closed_underneath_is_dropped_and_the_read_answers(
    db: Database, mixed: dict[str, int]
) -> None:
    if db.dialect != "postgresql":
        pytest.skip("the driver's own path is PostgreSQL's")
    rows_q, _ = _list_statements(("status",), with_text=False, total="counters")
    parameters = {"filter_status": "CONCLUIDO", "page_offset": 0, "page_size": 5}
    expected = [tuple(row) for row in await db.rows(rows_q, parameters)]
    # The one idle pooled connection dies (a database restart, a proxy timing it out).
    pooled = await db.engine.raw_connection()
    driver = pooled.driver_connection
    assert driver is not None
    await driver.close()
    pooled.close()
    assert [tuple(row) for row in await db.rows(rows_q, parameters)] == expected
    assert [tuple(row) for row in await db.rows(rows_q, parameters)] == expected
    assert checked_out(db.engine) == 0


async def test_rest_items_of_a_page_are_the_views_rest_items(db: Database, mixed: dict[str, int]) -> None:
    from zoneinfo import ZoneInfo

    tz = ZoneInfo("America/Sao_Paulo")
    for filters, page, per_page in [
        (JobFilter(), None, None),
        (JobFilter(status="CONCLUIDO"), 1, 20),
        (JobFilter(q="padaria"), 1, 2),
        (JobFilter(), 2, 4),
        (JobFilter(), 9, 20),
    ]:
        views = await list_jobs(db, QUEUES, filters, page, per_page)
        items = await list_job_items(db, QUEUES, filters, tz, page, per_page)
        # Same keys in the same order, same values: the same bytes once encoded.
        assert [list(item.items()) for item in items.items] == [
            list(view.rest_item(tz).items()) for view in views.items
        ]
        assert (items.total, items.page, items.per_page, items.pages) == (
            views.total,
            views.page,
            views.per_page,
            views.pages,
        )


async def test_a_list_without_documents_reads_neither_context_nor_result(
    db: Database, mixed: dict[str, int]
) -> None:
    full = (await list_jobs(db, QUEUES, JobFilter())).items
    lean = (await list_jobs(db, QUEUES, JobFilter(), documents=False)).items
    assert any(view.context is not None for view in full)
    assert any(view.result is not None for view in full)
    assert lean == [replace(view, context=None, result=None) for view in full]
    after = full[0].id
    full_slice = await list_jobs_after(db, QUEUES, JobFilter(), 3, after)
    lean_slice = await list_jobs_after(db, QUEUES, JobFilter(), 3, after, documents=False)
    assert lean_slice.items == [replace(view, context=None, result=None) for view in full_slice.items]
    assert (lean_slice.has_next, lean_slice.total) == (full_slice.has_next, full_slice.total)


async def test_graphql_workers_built_from_rows_are_those_of_the_views(
    db: Database, mixed: dict[str, int]
) -> None:
    from zoneinfo import ZoneInfo

    from worker_automation.resolvers.job_views import views_of
    from worker_automation.schema.types import jobs_of, jobs_of_rows

    tz = ZoneInfo("America/Sao_Paulo")
    rows_q, _ = _list_statements((), with_text=False, total="counters")
    rows = await db.rows(rows_q, {"page_offset": 0, "page_size": 100})
    assert len(rows) == len(mixed)
    assert jobs_of_rows(rows, tz) == jobs_of(views_of(rows), tz)


async def test_list_reads_at_once_leave_connections_to_the_rest_of_the_pool(
    database_url: str, make_settings: MakeSettings
) -> None:
    import asyncio

    from sqlalchemy import event

    from worker_automation.models.database import GENERIC_SHARE, READ_SLOTS_SPARED

    await migrate(database_url)
    database = Database(make_settings(database_url, None, database_pool_size=8))
    held: dict[str, int] = {}
    most: dict[str, int] = {}

    def counting(pool: str) -> None:
        held[pool] = most[pool] = 0

        def checkout(*_: Any) -> None:
            held[pool] += 1
            most[pool] = max(most[pool], held[pool])

        def checkin(*_: Any) -> None:
            held[pool] -= 1

        engine = database.engine if pool == "main" else database._generic_engine
        if engine is not None:
            event.listen(engine.sync_engine, "checkout", checkout)
            event.listen(engine.sync_engine, "checkin", checkin)

    async def burst(filters: JobFilter) -> None:
        pages = await asyncio.gather(*(list_jobs(database, QUEUES, filters, 1, 2) for _ in range(40)))
        assert all([view.id for view in page.items] == [view.id for view in pages[0].items] for page in pages)
        assert len(pages[0].items) == 2

    try:
        await insert_rows(database, [job(i) for i in range(5)])
        # Both pools hold their connections before counting: a connection still being opened
        # when another read has already finished would make the reads look one at a time.
        await burst(JobFilter(cliente_id=PADARIA))
        await burst(JobFilter())
        counting("main")
        counting("generic")
        # Pages by a client are planned for their values, on the pool's connections.
        await burst(JobFilter(cliente_id=PADARIA))
        if database.dialect == "postgresql":
            assert 1 < most["main"] <= 8 - READ_SLOTS_SPARED
            assert most["generic"] == 0
        # Pages of every job keep one plan, on the connections kept for that (a quarter).
        most["main"] = 0
        await burst(JobFilter())
        if database.dialect == "postgresql":
            assert most["main"] == 0
            assert 1 < most["generic"] <= 8 // GENERIC_SHARE
    finally:
        await database.close()


async def prepared_plans(engine: Any, connections: int) -> list[Any]:
    """The plan counts of the statements over ``workers`` prepared on ``connections`` of
    ``engine``'s pool, each given back as the service gives them (its reset awaits)."""
    pooled = [await engine.raw_connection() for _ in range(connections)]
    plans: list[Any] = []
    try:
        for connection in pooled:
            driver = connection.driver_connection
            assert driver is not None
            plans += await driver.fetch(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%FROM workers%' AND statement NOT LIKE '%pg_prepared_statements%'"
            )
    finally:
        for connection in pooled:
            await greenlet_spawn(connection.close)
    return plans


async def test_pages_along_one_index_are_planned_once_for_every_page(
    database_url: str, make_settings: MakeSettings
) -> None:
    """Left to choose, PostgreSQL planned a page statement anew on every execution (its OFFSET
    parameter makes the generic plan look costly): pages of every job, or of a status in a
    queue, now run on connections that keep the statement's one plan, page after page."""
    if not database_url.startswith("postgresql"):
        pytest.skip("plans are PostgreSQL's")
    await migrate(database_url)
    database = Database(make_settings(database_url, None, database_pool_size=4))
    try:
        await insert_rows(database, [job(i) for i in range(30)])
        for page in range(1, 13):
            every = await list_jobs(database, QUEUES, JobFilter(), page, 2)
            queued_filter = JobFilter(status="AGENDADO", queue="certidao")
            queued = await list_jobs(database, QUEUES, queued_filter, page, 2)
            assert every.total == queued.total == 30
            assert len(every.items) == len(queued.items) == 2
            after = every.items[-1].id
            sliced = await list_jobs_after(database, QUEUES, JobFilter(), 2, after, documents=False)
            assert [view.id for view in sliced.items] == [after - 1, after - 2]
        engine = database._generic_engine
        assert engine is not None
        plans = await prepared_plans(engine, 1)
        # The pool of one connection ran the three statements (two pages, a slice after a cursor),
        # twelve times each, with one plan each.
        assert len(plans) == 3
        assert all(row["custom_plans"] == 0 and row["generic_plans"] == 12 for row in plans), plans
    finally:
        await database.close()


async def test_the_live_views_lists_are_planned_once(database_url: str, make_settings: MakeSettings) -> None:
    """The dashboard's lists and the queues' first tasks are polled by every open screen. Their
    values are the same at every call and are written into the statements, which PostgreSQL then
    plans once: with them as parameters it planned both for their values (at 1M rows, on every
    call; here, on the first five)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("plans are PostgreSQL's")
    from worker_automation.resolvers.live import _tasks_of
    from worker_automation.resolvers.live_reads import read_dashboard_lists

    await migrate(database_url)
    database = Database(make_settings(database_url, None, database_pool_size=4))
    wanted = tuple(
        (queue, status) for queue in QUEUES for status in (JobStatus.EXECUTANDO, JobStatus.AGENDADO)
    )
    try:
        await insert_rows(database, [job(i) for i in range(6)])
        for _ in range(12):
            lists = await read_dashboard_lists(database)
            tasks = await _tasks_of(database, wanted)
            assert len(lists.queued) == 6 and sum(len(found) for found in tasks.values()) == 6
        plans = await prepared_plans(database.engine, 3)
        assert plans and sum(row["custom_plans"] for row in plans) == 0, plans
        assert sum(row["generic_plans"] for row in plans) >= 24, plans
    finally:
        await database.close()
