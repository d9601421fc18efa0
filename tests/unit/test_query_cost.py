"""The GraphQL cost limit lets every query the product sends through and stops the alias and
page-size attacks: costs computed on the real schema, for the console's screens, the documents in
the README, the benchmarks and the tests, and for the attacks themselves."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphql import DocumentNode, GraphQLError, parse, validate

from worker_automation.schema import build_schema
from worker_automation.schema.cost import HEAVY_WEIGHT, document_bounds
from worker_automation.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings(database_url="sqlite+aiosqlite:///:memory:")
SCHEMA = build_schema(SETTINGS)._schema

# Every field of a job, as a console's list of jobs shows them (and as a detail screen does).
EVERY_WORKER_FIELD = """
  id taskId clienteId usuarioId pathFile status dataInicio dataFim mensagemErro automationType queue
  priority retryCount progress metadataJson displayName clientName context result createdAt updatedAt
  machineId machine { id name automation queue status isOn createdAt lastClaimAt }
  cliente { id razaoSocial cnpj }
"""
CONSOLE = {
    "jobs page of 100, every field": (
        "query Jobs($f: WorkerFilter, $p: Int!) { workers(filter: $f, page: $p, perPage: 100) "
        f"{{ total page perPage pages items {{ {EVERY_WORKER_FIELD} }} }} }}"
    ),
    "one job": f"query Job($id: Int!) {{ worker(id: $id) {{ {EVERY_WORKER_FIELD} }} }}",
    "dashboard": (
        "{ dashboard { stats { total byStatus byQueue } summary { totalActive totalPending "
        "totalCompletedToday totalErrorsToday } broker { available queues } errors "
        "queues { queueName workersCount activeCount pendingCount capacity loadPercent } "
        f"active {{ {EVERY_WORKER_FIELD} }} queued {{ total items {{ {EVERY_WORKER_FIELD} }} }} "
        f"history {{ {EVERY_WORKER_FIELD} }} }} }}"
    ),
    "queue load": (
        "subscription { queueLoad { queues { queueName workersCount activeCount pendingCount capacity "
        "loadPercent activeTasks { id status progress displayName clientName dataInicio } "
        "pendingTasks { id priority displayName clientName createdAt } } "
        "summary { totalActive totalPending totalCompletedToday totalErrorsToday } } }"
    ),
}
ATTACKS = {
    "30 aliases of a 100-job page with context and result": "{ "
    + " ".join(f"a{i}: workers(perPage: 100) {{ items {{ context result }} }}" for i in range(30))
    + " }",
    "4 pages of 100 with context and result": "{ "
    + " ".join(f"a{i}: workers(perPage: 100) {{ items {{ context result }} }}" for i in range(4))
    + " }",
}
OPERATION = re.compile(r"^\s*(query|mutation|subscription|\{)")


def _documents_in(path: Path) -> Iterator[str]:
    """String constants of a Python file, and graphql blocks of a Markdown file, that look like
    operations (checked against the schema by the caller)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        for block in re.findall(r"```graphql\n(.*?)```", text, flags=re.S):
            yield from (line for line in block.splitlines() if line.strip())
        return
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and OPERATION.match(node.value):
            yield node.value


def _valid(source: str) -> DocumentNode | None:
    try:
        document = parse(source)
    except GraphQLError:
        return None
    return None if validate(SCHEMA, document) else document


def product_queries() -> dict[str, str]:
    """Every operation written out in the README, the benchmarks and the tests that the schema
    accepts as it stands (fragments of documents built at run time are left out)."""
    found: dict[str, str] = {}
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "bench").glob("*.py")),
        *sorted((ROOT / "tests").rglob("*.py")),
    ]
    for path in files:
        for source in _documents_in(path):
            if _valid(source) is not None:
                found.setdefault(source, str(path.relative_to(ROOT)))
    return found


def cost_of(source: str) -> int:
    document = _valid(source)
    assert document is not None, source
    return max(bounds.cost for _node, _name, bounds in document_bounds(SCHEMA, document))


@pytest.mark.parametrize("screen", sorted(CONSOLE))
def test_console_screens_pass(screen: str) -> None:
    cost = cost_of(CONSOLE[screen])
    # With room to spare for fields added later (a job's attempts list costs about 80 per job).
    assert cost * 1.3 < SETTINGS.graphql_max_cost, (screen, cost)


def test_every_query_of_the_product_passes() -> None:
    queries = product_queries()
    assert len(queries) >= 10, "the collection found too few documents to mean anything"
    costs = {source: cost_of(source) for source in queries}
    over = {queries[s]: c for s, c in costs.items() if c > SETTINGS.graphql_max_cost}
    assert not over


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attacks_are_refused(attack: str) -> None:
    assert cost_of(ATTACKS[attack]) > SETTINGS.graphql_max_cost


def test_heavy_fields_weigh_more_and_lists_multiply() -> None:
    one = cost_of("{ worker(id: 1) { id } }")
    heavy = cost_of("{ worker(id: 1) { id context } }")
    assert heavy - one == HEAVY_WEIGHT
    page = cost_of("{ workers(perPage: 50) { items { id } } }")
    bigger = cost_of("{ workers(perPage: 100) { items { id } } }")
    assert bigger - page == 50
    # Past the page size the resolver caps to, a larger number costs no more.
    assert cost_of("{ workers(perPage: 100000) { items { id } } }") == bigger
    by_variable = cost_of("query($n: Int!) { workers(perPage: $n) { items { id } } }")
    assert by_variable == bigger
