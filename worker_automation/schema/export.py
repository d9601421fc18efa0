"""Write the schema's SDL: ``python -m worker_automation.schema.export [--check] [PATH]`` (default
``schema.graphql``; ``--check`` writes nothing and exits 1 when the file differs from the code).

Run it from the repository root after changing the schema; a unit test fails while the committed
file and the code disagree.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from strawberry.printer import print_schema

from worker_automation.schema import build_schema
from worker_automation.settings import Settings

DEFAULT_PATH = Path("schema.graphql")


def sdl() -> str:
    """The SDL of the schema, as committed (the guards in the settings do not change it)."""
    return print_schema(build_schema(Settings())) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the SDL file (prints the path written), or with ``--check`` only compare it."""
    parser = argparse.ArgumentParser(prog="python -m worker_automation.schema.export")
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH, help="SDL file")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not the code's SDL")
    args = parser.parse_args(argv)
    path: Path = args.path
    text = sdl()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            print(f"{path} is out of date: run python -m worker_automation.schema.export")
            return 1
        print(f"{path} is up to date")
        return 0
    path.write_text(text, encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
