"""``python -m worker_automation.cli``: the same as the ``worker-automation`` script."""

from __future__ import annotations

import sys

from worker_automation.cli import main

sys.exit(main())
