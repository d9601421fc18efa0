"""Realistic demo data: client companies and a few thousand finished or queued jobs.

No job is seeded EXECUTANDO: nothing would run it, so it would look stuck forever. Queued jobs are
only of automations this installation can run (the demos, installed plugins): a queued job of any
other automation would fail as soon as a worker took it. A finished job that ran has its one
attempt, as a real run leaves it; a cancelled one never started (no start, no duration). Clients
are topped up to the number asked for, so running the command again adds jobs, not clients.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, bindparam, func, insert, literal, select

from worker_automation.catalog.registry import AUTOMATION_REGISTRY, Automation
from worker_automation.domain.documents import cnpj_check_digits
from worker_automation.domain.ranges import PRIORITY_MAX, PRIORITY_MIN
from worker_automation.domain.seed_limits import MAX_CLIENTES, MAX_JOBS
from worker_automation.models import Attempt, Cliente, Job, JobStatus, Usuario, utcnow
from worker_automation.models.database import Database

if TYPE_CHECKING:
    from worker_automation.resolvers.services import Services

_FIRST = [
    "Comércio de Alimentos",
    "Transportadora Horizonte",
    "Construtora Vale Verde",
    "Padaria Pão Dourado",
    "Clínica Bem Viver",
    "Auto Peças Central",
    "Distribuidora Sol Nascente",
    "Farmácia Popular do Povo",
    "Metalúrgica Aço Forte",
    "Escritório Contábil Exato",
    "Supermercado Boa Compra",
    "Laticínios Serra Azul",
    "Gráfica Impressão Rápida",
    "Tecnologia Nuvem Sul",
    "Hotel Mar Aberto",
    "Restaurante Sabor Caseiro",
    "Agropecuária Campo Bom",
    "Confecções Linha Fina",
    "Madeireira Ipê Roxo",
    "Óptica Visão Clara",
    "Imobiliária Chave de Ouro",
    "Logística Rota Norte",
    "Pet Shop Amigo Fiel",
    "Academia Corpo em Forma",
]
_SUFFIX = ["Ltda", "ME", "EIRELI", "S.A.", "EPP"]
BATCH_ROWS = 1000
# The one attempt of each seeded job that ran, from the job's own row: when it started and ended,
# how, and with what error.
_ATTEMPTS_OF = insert(cast(Table, Attempt.__table__)).from_select(
    ["worker_id", "number", "machine_id", "task_id", "started_at", "ended_at", "outcome", "error"],
    select(
        Job.id,
        literal(1),
        Job.machine_id,
        Job.task_id,
        Job.data_inicio,
        Job.data_fim,
        Job.status,
        Job.mensagem_erro,
    ).where(Job.task_id.in_(bindparam("task_ids", expanding=True)), Job.data_inicio.is_not(None)),
)
_ERRORS = [
    "Portal da Receita indisponivel (HTTP 503)",
    "Captcha nao resolvido apos 3 tentativas",
    "Certidao positiva: ha pendencias para o CNPJ",
    "Tempo esgotado aguardando o portal da SEFAZ",
    "Sessao do e-CAC expirada",
]


def fake_cnpj(rng: random.Random) -> str:
    base = f"{rng.randrange(10**8):08d}0001"
    return base + cnpj_check_digits(base)


@dataclass(frozen=True)
class SeedSummary:
    """What :func:`seed_demo` added."""

    clientes: int
    usuarios: int
    jobs: int
    # The queued jobs among them, to be sent to their queues (:func:`send_queued`).
    queued: tuple[int, ...] = ()


def runnable_here() -> list[Automation]:
    """The automations a worker here has an implementation of: installed plugins, else the demos
    (whose runs end quickly on their own)."""
    from importlib.metadata import entry_points

    from worker_automation.worker.implementations import BUILTIN_IMPLEMENTATIONS, ENTRY_POINT_GROUP

    plugins = {entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)}
    installed = [a for key, a in AUTOMATION_REGISTRY.items() if key in plugins]
    demos = [
        AUTOMATION_REGISTRY[key] for key in ("demo.echo", "demo.sleep") if key in BUILTIN_IMPLEMENTATIONS
    ]
    return installed or demos


def _context(rng: random.Random, automation: Automation) -> dict[str, Any]:
    if automation.key == "demo.sleep":
        return {"seconds": rng.randrange(1, 6)}
    return {"cnpj": fake_cnpj(rng)}


def _job_row(
    rng: random.Random,
    cliente_ids: list[int | None],
    usuario_ids: list[int],
    runnable: list[Automation],
) -> dict[str, Any]:
    history = [a for a in AUTOMATION_REGISTRY.values() if not a.key.startswith("demo.")]
    now = utcnow()
    created = now - timedelta(minutes=rng.randrange(0, 60 * 24 * 14))
    status = rng.choices(
        [JobStatus.CONCLUIDO, JobStatus.FALHA, JobStatus.CANCELADO, JobStatus.AGENDADO],
        weights=[80, 8, 4, 6],
    )[0]
    automation = rng.choice(runnable if status is JobStatus.AGENDADO else history)
    start = created + timedelta(seconds=rng.randrange(1, 600))
    row: dict[str, Any] = {
        # Task ids are identities, not demo content: never drawn from the (possibly seeded) rng,
        # or seeding twice with the same seed would collide on the unique task_id.
        "task_id": str(uuid.uuid4()),
        "cliente_id": rng.choice(cliente_ids) if rng.random() > 0.01 else None,
        "usuario_id": rng.choice(usuario_ids),
        "path_file": None,
        "status": status.value,
        "data_inicio": None,
        "data_fim": None,
        "mensagem_erro": None,
        "automation_type": automation.key,
        "queue": automation.queue,
        "priority": rng.choices(
            range(PRIORITY_MIN, PRIORITY_MAX + 1), weights=[40, 5, 5, 5, 10, 10, 5, 5, 5, 10]
        )[0],
        "retry_count": 0,
        "progress": 0,
        "metadata_json": None,
        "context": _context(rng, automation),
        "result": None,
        "created_at": created,
        "updated_at": created,
        "machine_id": None,
    }
    if status in (JobStatus.CONCLUIDO, JobStatus.FALHA):
        row["data_inicio"] = min(start, now)
        row["data_fim"] = min(start + timedelta(seconds=rng.randrange(5, 900)), now)
        row["updated_at"] = row["data_fim"]
    if status is JobStatus.CANCELADO:  # before it started
        row["data_fim"] = min(start, now)
        row["updated_at"] = row["data_fim"]
    if status is JobStatus.CONCLUIDO:
        row["progress"] = 100
        row["result"] = {
            "certidao_id": rng.randrange(1, 10**6),
            "tempo_execucao_s": round(rng.uniform(3, 120), 1),
        }
    if status is JobStatus.FALHA:
        message = rng.choice(_ERRORS)
        row["mensagem_erro"] = message
        row["result"] = {"exc_type": "AutomationError", "exc_message": message, "traceback": None}
    if status is JobStatus.CANCELADO:
        row["mensagem_erro"] = "Cancelado pelo operador"
    return row


async def seed_demo(
    db: Database,
    *,
    jobs: int = 3000,
    clientes: int = 60,
    seed: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> SeedSummary:
    """Top the clients up to ``clientes``, add the demo users once and insert ``jobs`` job rows
    in batches (not row by row); ``progress`` is told the rows inserted so far after each batch."""
    if not 0 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be between 0 and {MAX_JOBS}")
    if not 0 <= clientes <= MAX_CLIENTES:
        raise ValueError(f"clientes must be between 0 and {MAX_CLIENTES}")
    rng = random.Random(seed)
    async with db.session() as session:
        existing = set((await session.scalars(select(Cliente.cnpj))).all())
        present = int(await session.scalar(select(func.count()).select_from(Cliente)) or 0)
        new_clients = []
        for i in range(present, clientes):
            cnpj = fake_cnpj(rng)
            while cnpj in existing:  # 10^8 CNPJs to draw from: a redraw is rare and ends soon
                cnpj = fake_cnpj(rng)
            existing.add(cnpj)
            name = f"{_FIRST[i % len(_FIRST)]} {rng.choice(_SUFFIX)}"
            if i >= len(_FIRST):
                name = f"{_FIRST[i % len(_FIRST)]} {i // len(_FIRST) + 1} {rng.choice(_SUFFIX)}"
            new_clients.append({"razao_social": name, "cnpj": cnpj, "created_at": utcnow()})
        if new_clients:
            await session.execute(insert(Cliente), new_clients)
        users = [
            {"nome": n, "perfil": p, "created_at": utcnow()}
            for n, p in [
                ("Ana Souza", "administrador"),
                ("Bruno Lima", "diretoria"),
                ("Carla Dias", "funcionario"),
            ]
        ]
        if await session.scalar(select(Usuario.id).limit(1)) is None:
            await session.execute(insert(Usuario), users)
        else:
            users = []
        # With no client at all, jobs point at none (the rows allow it).
        cliente_ids: list[int | None] = list((await session.scalars(select(Cliente.id))).all()) or [None]
        usuario_ids = list((await session.scalars(select(Usuario.id))).all())
        runnable = runnable_here()
        queued: list[int] = []
        done = 0
        while done < jobs:
            count = min(BATCH_ROWS, jobs - done)
            batch = [_job_row(rng, cliente_ids, usuario_ids, runnable) for _ in range(count)]
            await session.execute(insert(Job), batch)
            await session.execute(_ATTEMPTS_OF, {"task_ids": [row["task_id"] for row in batch]})
            waiting = [row["task_id"] for row in batch if row["status"] == JobStatus.AGENDADO.value]
            if waiting:
                queued += (await session.scalars(select(Job.id).where(Job.task_id.in_(waiting)))).all()
            done += len(batch)
            if progress is not None:
                progress(done)
    return SeedSummary(len(new_clients), len(users), jobs, tuple(queued))


async def send_queued(services: Services, job_ids: Sequence[int]) -> int:
    """Send the seeded queued jobs' tasks to their queues, as a dispatch does (so nothing has to
    find them without a message later and send them again); how many went."""
    from worker_automation.resolvers.dispatch import Send, send_all

    sent = 0
    for start in range(0, len(job_ids), BATCH_ROWS):
        chunk = job_ids[start : start + BATCH_ROWS]
        async with services.db.session() as session:
            rows = (
                await session.execute(
                    select(Job.id, Job.task_id, Job.automation_type, Job.queue, Job.priority).where(
                        Job.id.in_(chunk), Job.status == JobStatus.AGENDADO.value, Job.task_id.is_not(None)
                    )
                )
            ).all()
        sends = [
            Send(job_id, str(task_id), AUTOMATION_REGISTRY[automation].task_name, queue, priority)
            for job_id, task_id, automation, queue, priority in rows
        ]
        sent += len(sends) - len(await send_all(services, sends))
    return sent
