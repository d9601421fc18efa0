"""``bench.plans`` reads auto_explain's notices: each statement's executions and its slowest plan."""

from __future__ import annotations

import json

from bench.plans import PLANS_FILE_ENV, SITECUSTOMIZE, parse_notice, plan_lines, statements_of


def _notice(ms: float, text: str, rows: int, hit: int) -> str:
    plan = {
        "Query Text": text,
        "Plan": {
            "Node Type": "Limit",
            "Actual Rows": rows,
            "Actual Loops": 1,
            "Actual Total Time": ms,
            "Shared Hit Blocks": hit,
            "Shared Read Blocks": 1,
            "Plans": [
                {
                    "Node Type": "Index Scan",
                    "Index Name": "ix_workers_history",
                    "Actual Rows": rows,
                    "Actual Loops": 1,
                    "Actual Total Time": ms,
                    "Index Cond": "(data_fim >= $1)",
                    "Rows Removed by Filter": 7,
                }
            ],
        },
    }
    return json.dumps({"pid": 1, "message": f"duration: {ms} ms  plan:\n{json.dumps(plan)}"})


def test_statements_are_grouped_by_text_with_their_slowest_plan() -> None:
    lines = [
        _notice(0.5, "SELECT 1   FROM workers", 20, 10),
        _notice(2.5, "SELECT 1 FROM workers", 20, 30),
        _notice(0.1, "SELECT 2", 1, 2),
        json.dumps({"pid": 1, "message": "duration: not a plan"}),
    ]
    first, second = statements_of(lines)
    assert first.text == "SELECT 1 FROM workers"
    assert first.durations_ms == [0.5, 2.5]
    assert (first.shared_hit, first.shared_read) == (40, 2)
    assert first.slowest is not None and first.slowest["Plan"]["Actual Total Time"] == 2.5
    assert second.text == "SELECT 2" and second.durations_ms == [0.1]


def test_a_plan_prints_one_line_per_node_with_its_conditions() -> None:
    parsed = parse_notice(json.loads(_notice(1.5, "SELECT 1", 20, 10))["message"])
    assert parsed is not None
    duration, plan = parsed
    assert duration == 1.5
    lines = list(plan_lines(plan["Plan"]))
    assert lines[0].startswith("Limit: rows 20 x 1 loops, 1.5 ms, buffers hit 10 read 1")
    assert lines[1].startswith("  Index Scan index=ix_workers_history: rows 20")
    assert "  index cond: (data_fim >= $1)" in lines[2]
    assert lines[3].endswith("removed by filter: 7")


def test_a_notice_without_a_plan_is_skipped() -> None:
    assert parse_notice("duration: 1.0 ms  statement: SELECT 1") is None


def test_the_served_hook_compiles_and_writes_where_the_bench_reads() -> None:
    compile(SITECUSTOMIZE, "sitecustomize.py", "exec")
    assert f'os.environ["{PLANS_FILE_ENV}"]' in SITECUSTOMIZE
