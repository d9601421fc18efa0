"""Write the schema's SDL: ``python -m worker_automation.schema.export [PATH]`` (default ``schema.graphql``).

Run it from the repository root after changing the schema; a unit test fails while the committed
file and the code disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from strawberry.printer import print_schema

from worker_automation.schema import build_schema
from worker_automation.settings import Settings

DEFAULT_PATH = Path("schema.graphql")


def sdl() -> str:
    """The SDL of the schema, as committed (the guards in the settings do not change it)."""
    return print_schema(build_schema(Settings())) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the SDL file; prints the path written."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DEFAULT_PATH
    path.write_text(sdl(), encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
