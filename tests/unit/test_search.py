"""Fuzzy automation search: typos, accents, ranking, the score threshold and the JSON shape."""

from __future__ import annotations

import itertools
import json

import pytest

from worker_automation.catalog.registry import AUTOMATION_REGISTRY
from worker_automation.resolvers.search import MIN_SCORE, normalize, search_automations

ALL = list(AUTOMATION_REGISTRY.values())


def keys(q: str | None) -> list[str]:
    return [item.key for item in search_automations(ALL, q).results]


def test_typo_finds_trabalhista_first() -> None:
    assert keys("trabalhsta")[0] == "certidao_trabalhista"


def test_exact_word_scores_full() -> None:
    first = search_automations(ALL, "trabalhista").results[0]
    assert first.key == "certidao_trabalhista"
    assert first.score is not None and first.score >= 95


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("simples", "simples_nacional"),
        ("Simples Nacional", "simples_nacional"),
        ("fgts", "cnd_fgts"),
        ("FGTS", "cnd_fgts"),
        ("Certidão Trabalhista", "certidao_trabalhista"),
        ("certidao trabalhista", "certidao_trabalhista"),
        ("CERTIDAO TRABALHSTA", "certidao_trabalhista"),
        ("certidao_trabalhista", "certidao_trabalhista"),
        ("trab", "certidao_trabalhista"),
        ("cnd federal", "cnd_federal"),
        ("caixa postal", "ecac_caixa_postal"),
        ("diario oficial", "observer_dou"),
        ("certidoes vencidas", "scan_certidoes_vencidas"),
        ("demo.sleep", "demo.sleep"),
        ("healthcheck", "observer_healthcheck_portais"),
    ],
)
def test_best_match_first(query: str, expected: str) -> None:
    assert keys(query)[0] == expected


@pytest.mark.parametrize("query", ["xyzzy qwerty", "zzzzzz", "banana", "hello world", "qq", "12345"])
def test_nonsense_finds_nothing(query: str) -> None:
    result = search_automations(ALL, query)
    assert result.results == ()
    assert result.count == 0
    assert result.to_dict() == {"results": []}


def test_results_are_thresholded_and_ordered() -> None:
    results = search_automations(ALL, "certidao").results
    assert len(results) > 1
    scores = [item.score for item in results if item.score is not None]
    assert len(scores) == len(results) and all(MIN_SCORE <= score <= 100 for score in scores)
    assert scores == sorted(scores, reverse=True)
    for a, b in itertools.pairwise(results):
        if a.score == b.score:
            assert normalize(a.display_name) <= normalize(b.display_name)


def test_category_matches() -> None:
    found = set(keys("varreduras"))
    assert {a.key for a in ALL if a.category == "Varreduras"} <= found


def test_accents_ignored_both_ways() -> None:
    assert keys("automacoes de interface")[:4] == keys("Automações de Interface")[:4]
    assert normalize("Certidão ÓRFÃ  x") == "certidao orfa x"


def test_query_result_shape() -> None:
    result = search_automations(ALL, "trabalhista")
    data = result.to_dict()
    assert set(data) == {"results"}
    assert data["results"][0] == {
        "key": "certidao_trabalhista",
        "display_name": "Certidão Trabalhista (CNDT)",
        "category": "Certidões",
        "queue": "certidao",
        "requires_selenium": True,
        "score": 100,
    }
    assert result.count == len(data["results"])
    assert all(isinstance(item["score"], int) for item in data["results"])
    json.dumps(data)


@pytest.mark.parametrize("q", [None, "", "   "])
def test_no_query_lists_everything(q: str | None) -> None:
    result = search_automations(ALL, q)
    data = result.to_dict()
    assert set(data) == {"results", "by_category", "total"}
    assert data["total"] == len(ALL) == result.count == len(data["results"])
    assert [item["key"] for item in data["results"]] == [a.key for a in ALL]
    assert all("score" not in item for item in data["results"])
    assert set(data["by_category"]) == {a.category for a in ALL}
    grouped = [item["key"] for items in data["by_category"].values() for item in items]
    assert sorted(grouped) == sorted(a.key for a in ALL)
    assert all(item["category"] == cat for cat, items in data["by_category"].items() for item in items)
    assert json.loads(json.dumps(data)) == data


def test_searches_only_what_it_is_given() -> None:
    subset = [AUTOMATION_REGISTRY["demo.sleep"], AUTOMATION_REGISTRY["demo.echo"]]
    assert [i.key for i in search_automations(subset, "trabalhista").results] == []
    assert search_automations(subset, None).total == 2
