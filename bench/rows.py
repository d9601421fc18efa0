"""Realistic job rows for the load benchmark, as tuples ready for COPY.

Every status (terminal rows across 30 days, a two-day backlog of AGENDADO, a few EXECUTANDO from
the last hour), the five queues, the registry's real automations with contexts that pass their
forms, results and error messages, and a few rows whose client is missing.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import date, datetime, timedelta
from typing import Any

from worker_automation.catalog.forms import UFS, FormField
from worker_automation.catalog.registry import AUTOMATION_REGISTRY, Automation
from worker_automation.domain.documents import cpf_check_digits

COLUMNS = (
    "task_id",
    "cliente_id",
    "usuario_id",
    "path_file",
    "status",
    "data_inicio",
    "data_fim",
    "mensagem_erro",
    "automation_type",
    "queue",
    "priority",
    "retry_count",
    "progress",
    "metadata_json",
    "context",
    "result",
    "created_at",
    "updated_at",
    "machine_id",
)
DAYS = 30
# Share of jobs per queue (certificates and portal scraping dominate real traffic).
QUEUE_WEIGHTS = {"certidao": 40, "scraping": 35, "scan": 10, "observer": 10, "ui_automation": 5}
# Jobs from the last two days may still wait in a backlog; from the last hour some still run.
BACKLOG_AGE = timedelta(hours=48)
BACKLOG_SHARE = 0.35
RUNNING_AGE = timedelta(hours=1)
RUNNING_SHARE = 0.04
TERMINAL = (("CONCLUIDO", 86), ("FALHA", 9), ("CANCELADO", 5))
PRIORITIES = (list(range(10)), [40, 5, 5, 5, 10, 10, 5, 5, 5, 10])
ERRORS = (
    "Portal da Receita indisponivel (HTTP 503)",
    "Captcha nao resolvido apos 3 tentativas",
    "Certidao positiva: ha pendencias para o CNPJ",
    "Tempo esgotado aguardando o portal da SEFAZ",
    "Sessao do e-CAC expirada",
    "Certificado digital do cliente vencido",
    "Elemento nao encontrado na pagina: #btnEmitir",
    "Limite de consultas por hora excedido no portal",
)
CANCEL_MESSAGES = ("Cancelado pelo operador", "Cancelado: cliente inativado", "Movido de fila pelo operador")
CITIES = (("Sao Paulo", "SP"), ("Campinas", "SP"), ("Curitiba", "PR"), ("Belo Horizonte", "MG"),
          ("Porto Alegre", "RS"), ("Recife", "PE"), ("Goiania", "GO"), ("Florianopolis", "SC"))  # fmt: skip
COMPANY_WORDS = ("Comercio", "Transportes", "Construtora", "Padaria", "Clinica", "Auto Pecas",
                 "Distribuidora", "Farmacia", "Metalurgica", "Contabilidade", "Supermercado",
                 "Laticinios", "Grafica", "Tecnologia", "Hotel", "Restaurante", "Agropecuaria",
                 "Confeccoes", "Madeireira", "Otica", "Imobiliaria", "Logistica", "Pet Shop")  # fmt: skip
COMPANY_NAMES = ("Horizonte", "Vale Verde", "Sol Nascente", "Serra Azul", "Boa Vista", "Campo Bom",
                 "Linha Fina", "Ipe Roxo", "Mar Aberto", "Rota Norte", "Bom Jesus", "Sao Jorge",
                 "Santa Clara", "Nova Era", "Aurora", "Tres Irmaos", "Primavera", "Brasil")  # fmt: skip
SUFFIXES = ("Ltda", "ME", "EIRELI", "S.A.", "EPP")


def fake_cpf(rng: random.Random) -> str:
    base = "".join(str(rng.randrange(10)) for _ in range(9))
    return base + cpf_check_digits(base)


def field_value(field: FormField, rng: random.Random, cnpj: str) -> Any:
    """A value a real operator would type into ``field`` (it passes the form's validation)."""
    if field.type == "cnpj":
        return cnpj
    if field.type == "cpf":
        return fake_cpf(rng)
    if field.type == "uf":
        return rng.choice(sorted(UFS))
    if field.type == "date":
        return (date(2026, 1, 1) + timedelta(days=rng.randrange(300))).isoformat()
    if field.type == "choice":
        return rng.choice(field.choices)
    if field.type == "boolean":
        return rng.random() < 0.3
    if field.type in ("integer", "number"):
        low = int(field.minimum if field.minimum is not None else 0)
        high = int(field.maximum if field.maximum is not None else 100)
        if field.name == "ano":
            low, high = 2022, 2026
        return rng.randint(low, high)
    if field.type == "url":
        return "https://www.gov.br/receitafederal"
    if field.name == "municipio":
        return rng.choice(CITIES)[0]
    if field.name == "termos":
        return "licitacao; pregao eletronico"
    return "consulta"


def contexts_for(automation: Automation, rng: random.Random, cnpjs: list[str], count: int) -> list[str]:
    """``count`` JSON contexts for ``automation`` (drawn at load time, so they are precomputed)."""
    out = []
    for _ in range(count):
        cnpj = rng.choice(cnpjs)
        ctx = {
            f.name: field_value(f, rng, cnpj)
            for f in automation.form.fields
            if f.required or rng.random() < 0.5
        }
        out.append(json.dumps(ctx))
    return out


def result_for(automation: Automation, rng: random.Random, task_id: str, seconds: float) -> str:
    if automation.queue == "certidao":
        value: dict[str, Any] = {
            "certidao": rng.choice(["negativa", "negativa", "negativa", "positiva com efeito de negativa"]),
            "codigo_controle": f"{rng.getrandbits(64):016X}",
            "validade": (date(2026, 6, 1) + timedelta(days=rng.randrange(180))).isoformat(),
            "arquivo": f"certidoes/{task_id}.pdf",
        }
    elif automation.queue == "scraping":
        value = {"registros": rng.randrange(0, 400), "paginas": rng.randrange(1, 30)}
    elif automation.queue == "scan":
        value = {"verificados": rng.randrange(100, 5000), "inconsistencias": rng.randrange(0, 40)}
    elif automation.queue == "observer":
        value = {"alertas": rng.randrange(0, 5), "fontes_verificadas": rng.randrange(1, 20)}
    else:
        value = {"arquivos": rng.randrange(1, 12), "tela_final": "concluido"}
    value["tempo_execucao_s"] = round(seconds, 1)
    return json.dumps(value)


class RowFactory:
    """Makes job rows as tuples in :data:`COLUMNS` order, ids rising with ``created_at``."""

    def __init__(
        self, seed: int, cliente_ids: list[int], usuario_ids: list[int], cnpjs: list[str], now: datetime
    ) -> None:
        rng = random.Random(seed)
        self.seed = seed
        self.cliente_ids = cliente_ids
        self.usuario_ids = usuario_ids
        self.missing_cliente = max(cliente_ids, default=0) + 10_000  # rows pointing at nothing
        self.now = now
        self.start = self.now - timedelta(days=DAYS)
        by_queue: dict[str, list[Automation]] = {}
        for a in AUTOMATION_REGISTRY.values():
            if not a.key.startswith("demo."):
                by_queue.setdefault(a.queue, []).append(a)
        self.queues = list(QUEUE_WEIGHTS)
        self.queue_weights = [QUEUE_WEIGHTS[q] for q in self.queues]
        self.by_queue = by_queue
        self.contexts = {a.key: contexts_for(a, rng, cnpjs, 64) for q in by_queue.values() for a in q}
        self.hosts = {q: [f"{q}-{i}@worker-{i % 3 + 1}" for i in range(1, 4)] for q in self.queues}

    def rows(self, first: int, count: int, total: int) -> list[tuple[Any, ...]]:
        """Rows ``first`` .. ``first + count - 1`` of ``total`` (the same rows for the same arguments)."""
        rng = random.Random(self.seed * 1_000_003 + first)
        span = (self.now - self.start).total_seconds()
        out = []
        for i in range(first, first + count):
            created = self.start + timedelta(seconds=span * i / total + rng.uniform(0, 2))
            out.append(self._row(rng, min(created, self.now)))
        return out

    def _by_now(self, instant: datetime, earliest: datetime, rng: random.Random) -> datetime:
        """``instant``, or a random instant between ``earliest`` and now when it is still to come.
        (Cutting it to now would give every such row the same instant: at 10M rows, some 1,900
        jobs ending in the same microsecond, which no real queue shows and which a read ordered
        by that instant must then read whole.)"""
        if instant <= self.now:
            return instant
        return earliest + (self.now - earliest) * rng.random()

    def _row(self, rng: random.Random, created: datetime) -> tuple[Any, ...]:
        queue = rng.choices(self.queues, self.queue_weights)[0]
        automation = rng.choice(self.by_queue[queue])
        age = self.now - created
        roll = rng.random()
        if age < RUNNING_AGE and roll < RUNNING_SHARE:
            status = "EXECUTANDO"
        elif age < BACKLOG_AGE and roll < BACKLOG_SHARE:
            status = "AGENDADO"
        else:
            status = rng.choices([s for s, _ in TERMINAL], [w for _, w in TERMINAL])[0]
        task_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        roll = rng.random()
        cliente_id: int | None
        if roll < 0.008:
            cliente_id = None
        elif roll < 0.01:
            cliente_id = self.missing_cliente
        else:
            cliente_id = rng.choice(self.cliente_ids)
        data_inicio = data_fim = None
        mensagem_erro = path_file = result = metadata = None
        progress = retry = 0
        updated = created
        if status != "AGENDADO":
            data_inicio = self._by_now(created + timedelta(seconds=rng.uniform(0.5, 600)), created, rng)
            metadata = json.dumps({"hostname": rng.choice(self.hosts[queue]), "attempt": 1})
            updated = data_inicio
        if status == "EXECUTANDO":
            progress = rng.randrange(1, 99)
        elif status != "AGENDADO":
            assert data_inicio is not None
            seconds = rng.uniform(3, 900)
            data_fim = self._by_now(data_inicio + timedelta(seconds=seconds), data_inicio, rng)
            updated = data_fim
            if status == "CONCLUIDO":
                progress = 100
                result = result_for(automation, rng, task_id, seconds)
                if queue == "certidao":
                    path_file = f"/data/certidoes/{created:%Y/%m}/{task_id}.pdf"
            elif status == "FALHA":
                mensagem_erro = rng.choice(ERRORS)
                progress = rng.randrange(0, 90)
                retry = rng.choice((0, 0, 1, 2))
                result = json.dumps(
                    {"exc_type": "AutomationError", "exc_message": mensagem_erro, "traceback": None}
                )
            else:
                mensagem_erro = rng.choice(CANCEL_MESSAGES)
                progress = rng.randrange(0, 60)
        return (
            task_id,
            cliente_id,
            rng.choice(self.usuario_ids),
            path_file,
            status,
            data_inicio,
            data_fim,
            mensagem_erro,
            automation.key,
            queue,
            rng.choices(*PRIORITIES)[0],
            retry,
            progress,
            metadata,
            rng.choice(self.contexts[automation.key]),
            result,
            created,
            updated,
            None,
        )
