"""The ``worker-automation`` command line: serve, workers, migrations and admin chores.

``build_parser`` lays out the commands (``parser``); each command lives in the module named after
what it runs: ``serve`` (the API and its processes), ``processes`` (pool workers, dedicated
machines, the MCP server), ``admin`` (migrations, keys, clients, machines, demo data),
``dispatch`` (jobs sent to the broker) and ``operator`` (jobs, queues, schedules, prune).
Settings, logging and the command's own module are loaded only once the arguments parse, so the
answers that need none of them (``--version``, ``--help``, a usage error) come at once.
"""

from __future__ import annotations

import sys

from worker_automation.cli.parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pydantic import ValidationError

    from worker_automation.domain.errors import DomainError
    from worker_automation.infra.logs import configure
    from worker_automation.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            (f"WA_{'_'.join(map(str, e['loc'])).upper()}: " if e["loc"] else "") + e["msg"]
            for e in exc.errors()
        )
        print(f"error: configuration: {problems}", file=sys.stderr)
        return 2
    configure(settings.log_format, verbose=args.verbose)
    try:
        code: int = args.fn(args)
    except DomainError as exc:
        field = getattr(exc, "field", None)
        print(f"error: {exc.message}" + (f" (field {field})" if field else ""), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code
