"""A pool worker talks only to the API: it loads neither the database models nor SQLAlchemy (each
of its processes would carry them for nothing)."""

from __future__ import annotations

import subprocess
import sys


def test_the_pool_worker_does_not_load_the_database_layer() -> None:
    probe = (
        "import sys, worker_automation.worker.pool; "
        "print(sorted(m for m in ('sqlalchemy', 'worker_automation.models') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
