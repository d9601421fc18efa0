"""How an embedded ``serve`` tells the process it starts which pool workers to fork: kept apart
from the forking itself so that ``serve`` can name it without importing any worker code."""

from __future__ import annotations

from typing import Final

# The workers to fork, as JSON: {queue: {"argv": [worker command line], "env": {its own variables}}}.
POOL_VARIABLE: Final = "WA_EMBEDDED_POOL"
