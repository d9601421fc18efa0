"""The committed ``schema.graphql`` is the schema the code builds."""

from __future__ import annotations

from pathlib import Path

from worker_automation.schema.export import main, sdl

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMITTED = REPO_ROOT / "schema.graphql"


def test_committed_sdl_matches_the_code() -> None:
    assert COMMITTED.exists(), "schema.graphql is missing: run `python -m worker_automation.schema.export`"
    assert COMMITTED.read_text(encoding="utf-8") == sdl(), (
        "schema.graphql is out of date: run `python -m worker_automation.schema.export` from the repo root"
    )


def test_export_writes_the_sdl(tmp_path: Path) -> None:
    target = tmp_path / "out.graphql"
    assert main([str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert text == sdl()
    for name in ("type Query", "type Mutation", "type Subscription", "scalar JSON", "enum JobStatus"):
        assert name in text


def test_check_compares_without_writing(tmp_path: Path) -> None:
    target = tmp_path / "out.graphql"
    assert main(["--check", str(target)]) == 1
    assert not target.exists()
    target.write_text(sdl(), encoding="utf-8")
    assert main(["--check", str(target)]) == 0
    target.write_text("type Query { stale: Int }\n", encoding="utf-8")
    assert main(["--check", str(target)]) == 1
    assert target.read_text(encoding="utf-8") == "type Query { stale: Int }\n"
