"""The layers import downwards only: worker processes never load the API's operations or the
database layer, and the operations never know which transport called them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "worker_automation"
TRANSPORTS = (
    "worker_automation.schema",
    "worker_automation.rest_compat",
    "worker_automation.app",
    "worker_automation.cli",
    "worker_automation.mcp_server",
    "worker_automation.mcp_mount",
)
# Layer (a folder of the package) -> what none of its modules may import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "worker": ("worker_automation.resolvers", "worker_automation.models", *TRANSPORTS),
    "catalog": (
        "worker_automation.resolvers",
        "worker_automation.models",
        "worker_automation.broker",
        *TRANSPORTS,
    ),
    "models": ("worker_automation.resolvers", "worker_automation.broker", *TRANSPORTS),
    "resolvers": TRANSPORTS,
    "broker": ("worker_automation.resolvers", "worker_automation.models", *TRANSPORTS),
}


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def offences(layer: str) -> list[str]:
    bad: list[str] = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for name in sorted(imports_of(path)):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(PACKAGE)} imports {name}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_downwards(layer: str) -> None:
    assert offences(layer) == []


def test_the_check_finds_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from worker_automation.resolvers.claims import claim\n")
    assert "worker_automation.resolvers.claims" in imports_of(module)


def test_the_shared_words_import_nothing_of_the_package() -> None:
    assert not {n for n in imports_of(PACKAGE / "vocabulary.py") if n.startswith("worker_automation")}
