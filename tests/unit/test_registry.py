"""The automation catalogue: every entry is well-formed and the demo contract holds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from worker_automation.catalog.forms import form_schema, validate_context
from worker_automation.catalog.registry import AUTOMATION_REGISTRY, Automation
from worker_automation.domain.errors import BadInput
from worker_automation.resolvers.automations import registered
from worker_automation.settings import DEFAULT_QUEUES

CATEGORIES = {
    "Certidões",
    "Raspagem de Portais",
    "Varreduras",
    "Observadores",
    "Automações de Interface",
    "Demonstração",
}
ALL = list(AUTOMATION_REGISTRY.values())


@pytest.mark.parametrize("automation", ALL, ids=[a.key for a in ALL])
def test_every_automation_is_well_formed(automation: Automation) -> None:
    assert automation.queue in DEFAULT_QUEUES
    assert automation.category in CATEGORIES
    assert automation.task_name == f"worker_automation.automations.{automation.key}"
    assert 1 <= automation.max_concurrent_jobs <= 5
    assert automation.display_name.strip()
    assert automation.enabled
    assert not automation.dev_mode
    json.dumps(form_schema(automation.form))


def test_keys_match_entries_and_task_names_are_unique() -> None:
    assert all(key == automation.key for key, automation in AUTOMATION_REGISTRY.items())
    assert len({a.task_name for a in ALL}) == len(ALL)


def test_catalogue_covers_every_queue_with_real_automations() -> None:
    real = [a for a in ALL if not a.key.startswith("demo.")]
    assert len(real) >= 20
    assert {a.queue for a in real} == set(DEFAULT_QUEUES)
    assert all(a.requires_selenium for a in real if a.queue == "ui_automation")


def test_documented_entries() -> None:
    trabalhista = AUTOMATION_REGISTRY["certidao_trabalhista"]
    assert trabalhista.display_name == "Certidão Trabalhista (CNDT)"
    assert trabalhista.category == "Certidões"
    assert trabalhista.queue == "certidao"
    assert trabalhista.requires_selenium is True
    simples = AUTOMATION_REGISTRY["simples_nacional"]
    assert simples.display_name == "Simples Nacional"
    assert simples.queue == "scraping"


def test_cnd_forms_take_cnpj_and_location() -> None:
    estadual = validate_context(
        AUTOMATION_REGISTRY["cnd_estadual"].form, {"cnpj": "11.222.333/0001-81", "uf": "mg"}
    )
    assert estadual == {"cnpj": "11222333000181", "uf": "MG"}
    with pytest.raises(BadInput) as caught:
        validate_context(AUTOMATION_REGISTRY["cnd_municipal"].form, {"cnpj": "11222333000181", "uf": "SP"})
    assert caught.value.field == "context.municipio"


@pytest.mark.parametrize("key", ["demo.sleep", "demo.echo", "demo.fail"])
def test_demo_automations(key: str) -> None:
    demo = AUTOMATION_REGISTRY[key]
    assert demo.queue == "scan"
    assert demo.category == "Demonstração"
    assert demo.requires_selenium is False
    assert demo.max_concurrent_jobs == 5


def test_demo_forms() -> None:
    sleep = AUTOMATION_REGISTRY["demo.sleep"].form
    assert validate_context(sleep, {"seconds": 0.3}) == {"seconds": 0.3}
    for bad in ({}, {"seconds": -1}, {"seconds": 3601}, {"seconds": True}, {"seconds": "1"}):
        with pytest.raises(BadInput) as caught:
            validate_context(sleep, bad)
        assert caught.value.field == "context.seconds"
    echo = AUTOMATION_REGISTRY["demo.echo"].form
    assert validate_context(echo, {"a": 1, "b": {"c": [1]}}) == {"a": 1, "b": {"c": [1]}}
    assert validate_context(echo, {}) == {}
    fail = AUTOMATION_REGISTRY["demo.fail"].form
    assert validate_context(fail, {}) == {"message": "falha solicitada"}
    assert validate_context(fail, {"message": "boom"}) == {"message": "boom"}


def test_unknown_automation() -> None:
    with pytest.raises(BadInput) as caught:
        registered("nope")
    assert caught.value.field == "automation_type"
    assert registered("cnd_federal").queue == "certidao"
    assert registered("demo.sleep").queue == "scan"


def test_import_is_light() -> None:
    code = (
        "import sys; import worker_automation.catalog.registry; "
        "heavy = {'celery', 'sqlalchemy', 'redis', 'strawberry', 'rapidfuzz', 'pydantic', 'starlette'}; "
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
