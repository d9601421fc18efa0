"""The benchmark modules import one another without a circle.

A circle between two benchmarks (one importing the other's helpers while the other imports it
back, at the top or inside a function) means the shared part belongs in a module of its own.
Imports are read with ``ast``, nothing is imported, so the check stays fast.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``bench`` that ``path`` imports anywhere in its body."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from bench import x`` names the module x; ``from bench.x import y`` the module x.
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if len(parts) >= 2 and parts[0] == "bench" and parts[1] in modules:
                found.add(parts[1])
    found.discard(path.stem)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(BENCH.glob("*.py"))
    modules = {path.stem for path in paths}
    return {path.stem: bench_imports(path, modules) for path in paths}


def test_the_graph_sees_the_imports_of_bench() -> None:
    graph = import_graph()
    assert "common" in graph["pipeline"]
    assert "fault_setup" in graph["fault_soak"]
    assert "hostile_ws" in graph["hostile"]  # ``from bench import hostile_ws``


def test_bench_modules_import_one_another_without_a_circle() -> None:
    try:
        order = list(TopologicalSorter(import_graph()).static_order())
    except CycleError as exc:
        raise AssertionError(f"bench/ imports in a circle: {' -> '.join(exc.args[1])}") from None
    assert order
