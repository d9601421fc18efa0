"""How much demo data ``seed-demo`` accepts: enough for the 1M-row benchmarks, bounded so a typo
cannot fill a disk. Kept apart from the seeding itself so the command line can check its options
without loading the database layer."""

from __future__ import annotations

from typing import Final

MAX_JOBS: Final = 2_000_000
MAX_CLIENTES: Final = 100_000
