"""The fault tests' ledger and verdict: what counts as lost, stuck, run twice or sent again.

Checked on a bare ``workers`` table in SQLite (the same trigger the embedded fault tests install),
so that a fault test passing means what it says.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.integration.fault_support import SqliteLedger, Verdict

TABLE = """
CREATE TABLE workers (
    id INTEGER PRIMARY KEY, status TEXT, task_id TEXT, mensagem_erro TEXT,
    retry_count INTEGER DEFAULT 0, automation_type TEXT DEFAULT 'demo.sleep'
)
"""


def _ledger(tmp_path: Path) -> tuple[SqliteLedger, sqlite3.Connection]:
    path = tmp_path / "jobs.db"
    conn = sqlite3.connect(path)
    conn.execute(TABLE)
    conn.commit()
    ledger = SqliteLedger(path)
    ledger.install()
    return ledger, conn


def _run(conn: sqlite3.Connection, *statements: str) -> None:
    for statement in statements:
        conn.execute(statement)
    conn.commit()


def test_clean_runs_pass_and_each_problem_is_named(tmp_path: Path) -> None:
    ledger, conn = _ledger(tmp_path)
    _run(
        conn,
        # 1: ran once. 2: its message was lost, sent again, ran. 3: re-queued after a lost run.
        "INSERT INTO workers (id, status, task_id) VALUES (1, 'AGENDADO', 'a'), (2, 'AGENDADO', 'b'),"
        " (3, 'AGENDADO', 'c')",
        "UPDATE workers SET status = 'EXECUTANDO' WHERE id = 1",
        "UPDATE workers SET status = 'CONCLUIDO' WHERE id = 1",
        "UPDATE workers SET task_id = 'b2' WHERE id = 2",
        "UPDATE workers SET status = 'EXECUTANDO' WHERE id = 2",
        "UPDATE workers SET status = 'CONCLUIDO' WHERE id = 2",
        "UPDATE workers SET status = 'EXECUTANDO' WHERE id = 3",
        "UPDATE workers SET status = 'AGENDADO', task_id = 'c2', retry_count = 1 WHERE id = 3",
        "UPDATE workers SET status = 'EXECUTANDO' WHERE id = 3",
        "UPDATE workers SET status = 'CONCLUIDO' WHERE id = 3",
    )
    clean = Verdict(ledger.fates(), 0.0)
    assert not clean.problems()
    assert clean.fates[2].resends == 1 and clean.fates[1].resends == 0
    assert clean.fates[3].requeues == 1 and not clean.fates[3].duplicated

    _run(
        conn,
        # 4: never ran. 5: still running. 6: started twice without being sent back (run twice).
        # 7: failed without naming a fault. 8: failed without ever running.
        "INSERT INTO workers (id, status, task_id) VALUES (4, 'AGENDADO', 'd'), (5, 'AGENDADO', 'e'),"
        " (6, 'AGENDADO', 'f'), (7, 'AGENDADO', 'g'), (8, 'AGENDADO', 'h')",
        "UPDATE workers SET status = 'EXECUTANDO' WHERE id IN (5, 6, 7)",
        "UPDATE workers SET status = 'FALHA', mensagem_erro = 'worker_lost: morreu' WHERE id = 6",
        "UPDATE workers SET status = 'EXECUTANDO' WHERE id = 6",
        "UPDATE workers SET status = 'CONCLUIDO' WHERE id = 6",
        "UPDATE workers SET status = 'FALHA', mensagem_erro = 'erro qualquer' WHERE id = 7",
        "UPDATE workers SET status = 'FALHA', mensagem_erro = 'worker_lost' WHERE id = 8",
    )
    verdict = Verdict(ledger.fates(), 0.0)
    assert [f.id for f in verdict.lost] == [4]
    assert [f.id for f in verdict.stuck] == [5]
    assert [f.id for f in verdict.duplicated] == [6]
    assert [f.id for f in verdict.unnamed_failures] == [7]
    assert [f.id for f in verdict.failed_unstarted] == [8]
