"""The layers import downwards only: worker processes never load the API's operations or the
database layer, the operations never know which transport called them, and nothing lives loose at
the package root but its ``__init__`` and the settings a user configures.

Each folder of the package is a layer; :data:`MAY_IMPORT` says which other layers its modules may
import. The map itself must be free of circles, so no chain of imports can lead back up.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "worker_automation"
ROOT = "__init__"

_SHARED = frozenset({"domain", "settings", "infra"})
_DATA = _SHARED | {"catalog", "models", "broker"}
_OPERATIONS = _DATA | {"resolvers"}
_PROCESS = _OPERATIONS | {"process", "worker", ROOT}
_TRANSPORT = _OPERATIONS | {"process", "overrides", ROOT}

# Layer -> the other layers its modules may import (bottom first).
MAY_IMPORT: dict[str, frozenset[str]] = {
    ROOT: frozenset(),
    "domain": frozenset(),
    "overrides": frozenset(),
    "settings": frozenset({"domain"}),
    "infra": frozenset({"domain", "settings"}),
    "catalog": frozenset({"domain"}),
    "models": _SHARED,
    # overrides: the task messages written as Celery would write them.
    "broker": _SHARED | {"catalog", "overrides"},
    # overrides: Celery's signal-time messages routed to the log.
    "worker": _SHARED | {"catalog", "broker", "overrides"},
    "resolvers": _DATA,
    "process": _PROCESS - {"process"},
    "console": _SHARED,
    "rest_compat": _TRANSPORT,
    "schema": _TRANSPORT,
    "mcp": _TRANSPORT | {"rest_compat"},
    "asgi": _TRANSPORT | {"rest_compat", "schema", "mcp", "console"},
    "cli": _TRANSPORT | {"worker", "rest_compat", "schema", "mcp", "console", "asgi"},
}


def imports_of(path: Path) -> set[str]:
    """Every module of the package ``path`` imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "worker_automation"}


def layer_of(module: str) -> str:
    """``worker_automation.resolvers.claims`` -> ``resolvers``; the package itself -> ``__init__``."""
    parts = module.split(".")
    if len(parts) == 1 or not ((PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file()):
        return ROOT  # the package, or a name imported from its __init__
    return parts[1]


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_of_file(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def offences(path: Path) -> list[str]:
    layer = layer_of_file(path)
    allowed = MAY_IMPORT[layer] | {layer}
    return [
        f"{path.relative_to(PACKAGE)} ({layer}) imports {name}"
        for name in sorted(imports_of(path))
        if layer_of(name) not in allowed
    ]


def test_every_module_lives_in_a_known_layer() -> None:
    unknown = sorted(str(p.relative_to(PACKAGE)) for p in modules() if layer_of_file(p) not in MAY_IMPORT)
    assert unknown == [], "a module outside every layer (add it to a folder, or the folder to MAY_IMPORT)"


def test_the_layers_form_no_circle() -> None:
    try:
        order = list(TopologicalSorter(MAY_IMPORT).static_order())
    except CycleError as circle:  # pragma: no cover - the failure message is the point
        pytest.fail(f"the layers import each other in a circle: {circle.args[1]}")
    assert order.index("domain") < order.index("resolvers") < order.index("schema") < order.index("cli")


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_layer_imports_only_downwards(layer: str) -> None:
    bad = [o for p in modules() if layer_of_file(p) == layer for o in offences(p)]
    assert bad == []


def test_the_check_finds_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from worker_automation.resolvers.claims import claim\n")
    found = imports_of(module)
    assert "worker_automation.resolvers.claims" in found
    assert layer_of("worker_automation.resolvers.claims") == "resolvers"
    assert "resolvers" not in MAY_IMPORT["worker"]


def test_the_shared_words_import_nothing_of_the_package() -> None:
    assert imports_of(PACKAGE / "domain" / "vocabulary.py") == set()
