"""The catalogue of automations the platform knows how to run (``AUTOMATION_REGISTRY``).

Each entry says which Celery queue runs it, whether it needs a browser, how many of its jobs may
run at once, and the form its trigger context must satisfy. Importing this module has no side
effects and pulls in nothing heavy: the API, the CLI and every worker process read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from worker_automation.catalog.forms import Form, FormField

CERTIDOES = "Certidões"
RASPAGEM = "Raspagem de Portais"
VARREDURAS = "Varreduras"
OBSERVADORES = "Observadores"
INTERFACE = "Automações de Interface"
DEMONSTRACAO = "Demonstração"

TASK_PREFIX = "worker_automation.automations"
# How long past its time limit a run may take to stop before it is ended from outside: Celery's
# hard limit (the pool process killed) and the API's own check both wait this much longer.
TIME_LIMIT_GRACE_SECONDS: Final = 10.0
# The ``exc_type`` of a run ended by its time limit, whoever ended it (its worker or the API).
TIMEOUT_EXC_TYPE: Final = "TimeLimitExceeded"


def timeout_message(seconds: float) -> str:
    """The failure message of a run that passed its automation's time limit of ``seconds``."""
    return f"timeout: a execucao passou do limite de {seconds:g} s"


@dataclass(frozen=True)
class Automation:
    """One runnable automation and the rules its jobs are dispatched and claimed under."""

    key: str
    display_name: str
    category: str
    queue: str
    requires_selenium: bool
    task_name: str
    form: Form
    max_concurrent_jobs: int
    dev_mode: bool = False
    enabled: bool = True
    description: str = ""
    # Safe to run again from the start when a run was lost half-way (its process died): such a
    # job is queued again; any other lost run ends FALHA naming the fault.
    idempotent: bool = False
    # Automatic retries: runs in all (1: none), the backoff's base and cap in seconds (exponential
    # from the base with full jitter).
    max_attempts: int = 1
    retry_backoff_seconds: int = 10
    retry_backoff_max_seconds: int = 600
    # Time limit of one run in seconds (None: none). A run past it ends FALHA ``timeout: ...`` as
    # one attempt, so the retry policy applies to it.
    timeout_seconds: float | None = None


# Reusable fields: most automations act on one company (CNPJ) in one state or city.
def _cnpj() -> FormField:
    return FormField("cnpj", "CNPJ", "cnpj", required=True)


def _uf() -> FormField:
    return FormField("uf", "UF", "uf", required=True)


def _municipio() -> FormField:
    return FormField("municipio", "Município", "string", required=True, max_length=120)


def _periodo() -> tuple[FormField, FormField]:
    return (
        FormField("data_inicio", "Data inicial", "date", required=True),
        FormField("data_fim", "Data final", "date", required=True),
    )


def _ano(required: bool) -> FormField:
    return FormField("ano", "Ano", "integer", required=required, minimum=2000, maximum=2100)


def _mes() -> FormField:
    return FormField("mes", "Mês", "integer", required=True, minimum=1, maximum=12)


def _antecedencia(default: int, maximum: int) -> FormField:
    return FormField(
        "dias_antecedencia", "Dias de antecedência", "integer", minimum=0, maximum=maximum, default=default
    )


# Queues whose automations only read (portals, scans, watchers): a lost run is simply run again.
# Certificates and desktop robots act on the outside world, so a lost run of theirs is reported.
READ_ONLY_QUEUES = frozenset({"scraping", "scan", "observer"})


def _automation(
    key: str,
    display_name: str,
    category: str,
    queue: str,
    *fields: FormField,
    selenium: bool = False,
    max_jobs: int = 1,
    description: str = "",
    allow_extra: bool = False,
    idempotent: bool | None = None,
    timeout: float | None = None,
) -> Automation:
    return Automation(
        key=key,
        display_name=display_name,
        category=category,
        queue=queue,
        requires_selenium=selenium,
        task_name=f"{TASK_PREFIX}.{key}",
        form=Form(fields=fields, allow_extra=allow_extra),
        max_concurrent_jobs=max_jobs,
        description=description,
        idempotent=queue in READ_ONLY_QUEUES if idempotent is None else idempotent,
        timeout_seconds=timeout,
    )


_CATALOGUE: tuple[Automation, ...] = (
    # --- certidao: emission of clearance certificates (CNDs), mostly behind captchas ---
    _automation(
        "cnd_federal", "CND Federal (Receita Federal/PGFN)", CERTIDOES, "certidao", _cnpj(),
        selenium=True, max_jobs=2,
        description="Certidão conjunta de débitos relativos a tributos federais e à dívida ativa da União.",
    ),
    _automation(
        "cnd_estadual", "CND Estadual (SEFAZ)", CERTIDOES, "certidao", _cnpj(), _uf(),
        selenium=True, max_jobs=2,
        description="Certidão negativa de débitos estaduais emitida pela SEFAZ da UF informada.",
    ),
    _automation(
        "cnd_municipal", "CND Municipal", CERTIDOES, "certidao", _cnpj(), _municipio(), _uf(),
        selenium=True, max_jobs=2,
        description="Certidão negativa de débitos mobiliários no portal da prefeitura.",
    ),
    _automation(
        "cnd_fgts", "CND FGTS (CRF Caixa)", CERTIDOES, "certidao", _cnpj(),
        selenium=True, max_jobs=2,
        description="Certificado de Regularidade do FGTS emitido pela Caixa Econômica Federal.",
    ),
    _automation(
        "certidao_trabalhista", "Certidão Trabalhista (CNDT)", CERTIDOES, "certidao", _cnpj(),
        selenium=True, max_jobs=2,
        description="Certidão Negativa de Débitos Trabalhistas emitida pelo TST.",
    ),
    _automation(
        "certidao_falencia", "Certidão de Falência e Recuperação Judicial", CERTIDOES, "certidao",
        _cnpj(), _uf(),
        selenium=True,
        description="Certidão de distribuição de falências e recuperações no Tribunal de Justiça.",
    ),
    _automation(
        "cnd_iptu", "Certidão Negativa de IPTU", CERTIDOES, "certidao",
        FormField("inscricao_imobiliaria", "Inscrição imobiliária", "string", required=True, max_length=40),
        _municipio(), _uf(),
        selenium=True,
        description="Certidão de débitos imobiliários de um imóvel na prefeitura.",
    ),
    _automation(
        "cnd_ibama", "Certidão Negativa de Débitos do IBAMA", CERTIDOES, "certidao", _cnpj(),
        description="Certidão de regularidade perante o IBAMA (CTF/APP).",
    ),
    # --- scraping: reading government portals ---
    _automation(
        "simples_nacional", "Simples Nacional", RASPAGEM, "scraping", _cnpj(), _ano(required=False),
        selenium=True, max_jobs=2,
        description="Situação de opção pelo Simples Nacional e SIMEI, com histórico de períodos.",
    ),
    _automation(
        "situacao_cadastral_cnpj", "Situação Cadastral do CNPJ (Receita Federal)", RASPAGEM, "scraping",
        _cnpj(),
        max_jobs=5,
        description="Comprovante de inscrição e situação cadastral do CNPJ.",
    ),
    _automation(
        "situacao_cadastral_cpf", "Situação Cadastral do CPF (Receita Federal)", RASPAGEM, "scraping",
        FormField("cpf", "CPF", "cpf", required=True),
        FormField("data_nascimento", "Data de nascimento", "date", required=True),
        max_jobs=3,
        description="Comprovante de situação cadastral do CPF de sócios e responsáveis.",
    ),
    _automation(
        "consulta_nfe_sefaz", "Consulta de NF-e (SEFAZ)", RASPAGEM, "scraping", _cnpj(), _uf(), *_periodo(),
        max_jobs=3,
        description="Notas fiscais eletrônicas emitidas contra o CNPJ no período.",
    ),
    _automation(
        "sintegra_inscricao_estadual", "Sintegra - Inscrição Estadual (SEFAZ)", RASPAGEM, "scraping",
        _cnpj(), _uf(),
        max_jobs=3,
        description="Situação da inscrição estadual no cadastro Sintegra da UF.",
    ),
    _automation(
        "dctfweb_situacao", "DCTFWeb - Declarações e Pendências", RASPAGEM, "scraping",
        _cnpj(), _ano(required=False),
        selenium=True, max_jobs=2,
        description="Declarações DCTFWeb transmitidas, pendentes e em atraso no e-CAC.",
    ),
    _automation(
        "ecac_caixa_postal", "e-CAC - Caixa Postal", RASPAGEM, "scraping", _cnpj(),
        selenium=True,
        description="Mensagens novas da caixa postal do contribuinte no e-CAC.",
    ),
    _automation(
        "ecac_situacao_fiscal", "e-CAC - Relatório de Situação Fiscal", RASPAGEM, "scraping", _cnpj(),
        selenium=True,
        description="Relatório de pendências fiscais (débitos, omissões de declaração) no e-CAC.",
    ),
    _automation(
        "pgdas_extrato", "Extrato do PGDAS-D", RASPAGEM, "scraping", _cnpj(), _ano(required=True), _mes(),
        selenium=True, max_jobs=2,
        description="Extrato da apuração mensal (PGDAS-D) do período.",
    ),
    _automation(
        "nfse_municipal", "Consulta de NFS-e Municipal", RASPAGEM, "scraping",
        _cnpj(), _municipio(), _uf(), *_periodo(),
        selenium=True, max_jobs=2,
        description="Notas fiscais de serviço emitidas e tomadas no portal da prefeitura.",
    ),
    # --- scan: sweeps over the platform's own data ---
    _automation(
        "scan_integridade_dados", "Integridade de Dados Cadastrais", VARREDURAS, "scan",
        FormField("escopo", "Escopo", "choice", choices=("ativos", "todos"), default="ativos"),
        description="Confere CNPJ, UF e município dos clientes e aponta cadastros inconsistentes.",
    ),
    _automation(
        "scan_certidoes_vencidas", "Varredura de Certidões Vencidas", VARREDURAS, "scan",
        _antecedencia(default=15, maximum=90),
        FormField("reemitir", "Reemitir automaticamente", "boolean", default=False),
        description="Lista certidões vencidas ou a vencer e, se pedido, agenda a reemissão.",
    ),
    _automation(
        "scan_cnpj_duplicados", "Varredura de CNPJs Duplicados", VARREDURAS, "scan",
        description="Encontra clientes cadastrados mais de uma vez com o mesmo CNPJ.",
    ),
    _automation(
        "scan_procuracoes_ecac", "Varredura de Procurações e-CAC", VARREDURAS, "scan",
        _antecedencia(default=30, maximum=180),
        description="Procurações eletrônicas vencidas ou a vencer que impedem o acesso ao e-CAC.",
    ),
    # --- observer: watchers that run on a schedule and raise alerts ---
    _automation(
        "observer_dou", "Monitor do Diário Oficial da União (DOU)", OBSERVADORES, "observer",
        FormField("termos", "Termos de busca", "string", required=True, max_length=500),
        FormField("secao", "Seção", "choice", choices=("1", "2", "3", "todas"), default="todas"),
        description="Publicações do DOU do dia que citam os termos informados.",
    ),
    _automation(
        "observer_healthcheck_portais", "Healthcheck de Portais Governamentais", OBSERVADORES, "observer",
        FormField("url", "URL específica", "url", max_length=2000),
        FormField("timeout_segundos", "Tempo limite (s)", "number", minimum=1, maximum=120, default=30),
        description="Verifica se os portais usados pelas automações estão no ar.",
    ),
    _automation(
        "observer_vencimento_guias", "Vencimento de Guias (DARF, DAS, GPS)", OBSERVADORES, "observer",
        _antecedencia(default=5, maximum=30),
        description="Guias de recolhimento com vencimento próximo e ainda não pagas.",
    ),
    _automation(
        "observer_dte_estadual", "Domicílio Tributário Eletrônico (DTE) Estadual", OBSERVADORES, "observer",
        _cnpj(), _uf(),
        selenium=True,
        description="Novas mensagens e intimações no DTE da SEFAZ.",
    ),
    # --- ui_automation: desktop and browser robots that need a screen (one at a time) ---
    _automation(
        "ui_emissao_guia_das", "Emissão de Guia DAS (PGDAS-D)", INTERFACE, "ui_automation",
        _cnpj(), _ano(required=True), _mes(),
        selenium=True,
        description="Gera e baixa o DAS do período pelo PGDAS-D.",
    ),
    _automation(
        "ui_download_xml_nfe", "Download de XML de NF-e (Portal Nacional)", INTERFACE, "ui_automation",
        _cnpj(), *_periodo(),
        selenium=True,
        description="Baixa os XMLs das NF-e do período com o certificado digital do cliente.",
    ),
    _automation(
        "ui_importacao_dominio", "Importação de Notas no Domínio Sistemas", INTERFACE, "ui_automation",
        _cnpj(), *_periodo(),
        selenium=True,
        description="Importa as notas do período no sistema contábil desktop (pyautogui).",
    ),
    _automation(
        "ui_validador_sped", "Validação de Arquivo SPED (PVA)", INTERFACE, "ui_automation",
        _cnpj(), _ano(required=True),
        FormField(
            "tipo", "Tipo de escrituração", "choice", required=True,
            choices=("ecd", "ecf", "efd_icms_ipi", "efd_contribuicoes"),
        ),
        selenium=True,
        description="Valida a escrituração no PVA da Receita e salva o relatório de erros.",
    ),
    # --- demo: real, tiny automations for demos and end-to-end tests ---
    _automation(
        "demo.sleep", "Demonstração: Aguardar", DEMONSTRACAO, "scan",
        FormField("seconds", "Segundos", "number", required=True, minimum=0, maximum=3600),
        max_jobs=5, idempotent=False,
        description="Aguarda os segundos informados, reportando o progresso.",
    ),
    _automation(
        "demo.echo", "Demonstração: Eco", DEMONSTRACAO, "scan",
        max_jobs=5, allow_extra=True,
        description="Devolve como resultado o próprio contexto recebido.",
    ),
    _automation(
        "demo.fail", "Demonstração: Falha", DEMONSTRACAO, "scan",
        FormField("message", "Mensagem de erro", "string", default="falha solicitada", max_length=1000),
        max_jobs=5,
        description="Falha de propósito com a mensagem informada.",
    ),
    _automation(
        "demo.timeout", "Demonstração: Limite de tempo", DEMONSTRACAO, "scan",
        FormField("seconds", "Segundos", "number", required=True, minimum=0, maximum=3600),
        max_jobs=5, idempotent=False, timeout=2.0,
        description="Aguarda os segundos informados com um limite de 2 s: acima dele, termina por timeout.",
    ),
)  # fmt: skip

AUTOMATION_REGISTRY: dict[str, Automation] = {automation.key: automation for automation in _CATALOGUE}


def celery_time_limits(task_name: str) -> tuple[float | None, float | None]:
    """Celery's ``(hard, soft)`` time limits for a task of ``task_name`` as the registry defines
    its automation (see :func:`celery_limits_of`)."""
    automation = AUTOMATION_REGISTRY.get(automation_key(task_name))
    return celery_limits_of(automation.timeout_seconds if automation is not None else None)


def automation_key(task_name: str) -> str:
    """The key of the automation whose task is ``task_name``."""
    return task_name.removeprefix(f"{TASK_PREFIX}.")


def celery_limits_of(timeout_seconds: float | None) -> tuple[float | None, float | None]:
    """Celery's ``(hard, soft)`` time limits for a run limited to ``timeout_seconds`` (the order
    of a task message's ``timelimit`` header): that limit plus the grace, then the limit."""
    if timeout_seconds is None:
        return None, None
    return timeout_seconds + TIME_LIMIT_GRACE_SECONDS, timeout_seconds
