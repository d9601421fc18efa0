"""The command line's layout: every command, its options and help, and the function it runs.

Nothing here loads the service: each command's function is named by module and imported when
that command runs, so ``--version``, ``--help`` and a usage error answer at once, and a command
loads only what it uses.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worker_automation import package_version
from worker_automation.domain.ranges import MAX_PER_PAGE, PRIORITY_MAX, PRIORITY_MIN, PRIORITY_RANGE
from worker_automation.domain.seed_limits import MAX_CLIENTES, MAX_JOBS


@dataclass(frozen=True)
class Command:
    """A command's function, ``module:name`` under ``worker_automation.cli``, loaded on call."""

    module: str
    name: str

    def __call__(self, args: argparse.Namespace) -> int:
        fn = getattr(importlib.import_module(f"worker_automation.cli.{self.module}"), self.name)
        code: int = fn(args)
        return code


DESCRIPTION = (
    "Control plane for automation workers: the API (REST, GraphQL, MCP), Celery pool workers, "
    "dedicated worker machines, migrations and admin chores. Configured from WA_* environment "
    "variables; with none set, serve runs everything in one process on a SQLite file in the "
    "working directory."
)


def _bounded(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [minimum, maximum]."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
        if number < minimum or (maximum is not None and number > maximum):
            upper = f" and at most {maximum}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{upper}, not {number}")
        return number

    return parse


_positive = _bounded(1)


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 1 and 65535, not {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="worker-automation", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="run the API (embedded broker and workers when WA_REDIS_URL is unset)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    serve.add_argument("--port", type=_port, default=8000, help="port to listen on (default %(default)s)")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="the HTTP server's log level (default %(default)s)",
    )
    serve.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="API processes sharing the port (needs WA_DATABASE_URL and WA_REDIS_URL when > 1)",
    )
    serve.set_defaults(fn=Command("serve", "cmd_serve"))

    worker = sub.add_parser("worker", help="run a Celery pool worker for one queue")
    worker.add_argument("-Q", "--queue", required=True, help="the queue to consume (certidao, scan, ...)")
    worker.add_argument(
        "-c",
        "--concurrency",
        type=_positive,
        default=None,
        help="jobs run at once (default: the queue's configured worker count)",
    )
    worker.add_argument("-n", "--name", default=None, help="Celery node name (default QUEUE-PID@HOST)")
    worker.set_defaults(fn=Command("processes", "cmd_worker"))

    ping = sub.add_parser("ping", help="health check: does this host's pool worker for a queue answer?")
    ping.add_argument("-Q", "--queue", required=True, help="the queue the worker consumes")
    ping.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for an answer (default %(default)s)"
    )
    ping.set_defaults(fn=Command("processes", "cmd_ping"))

    machine = sub.add_parser("machine", help="dedicated worker machines")
    machine_sub = machine.add_subparsers(dest="machine_command", required=True, metavar="COMMAND")
    run = machine_sub.add_parser("run", help="run the worker process for one automation")
    run.add_argument("--automation", required=True, help="the automation this machine serves")
    run.add_argument("-c", "--concurrency", type=_positive, default=1, help="jobs run at once (default 1)")
    run.set_defaults(fn=Command("processes", "cmd_machine_run"))

    sub.add_parser("migrate", help="apply database migrations").set_defaults(
        fn=Command("admin", "cmd_migrate")
    )

    bootstrap = sub.add_parser(
        "bootstrap", help="migrate, and give each queue's pool workers a machine and a key file"
    )
    bootstrap.add_argument(
        "--keys-dir", required=True, help="where to write QUEUE.key (a working key is kept)"
    )
    bootstrap.set_defaults(fn=Command("admin", "cmd_bootstrap"))

    mcp = sub.add_parser("mcp", help="serve the MCP tools over stdio (for a desktop LLM client)")
    mcp.add_argument(
        "--api-key",
        default=None,
        help="the operator API key the tools act with (default: WA_API_KEY)",
    )
    mcp.set_defaults(fn=Command("processes", "cmd_mcp"))

    keys = sub.add_parser("keys", help="operator API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")
    create = keys_sub.add_parser("create", help="create a key (printed once, as the last line)")
    create.add_argument("--perfil", required=True, help="administrador | diretoria | funcionario")
    create.add_argument("--scopes", required=True, help="comma-separated, e.g. worker_automation:read")
    create.add_argument("--name", default="cli", help="a label shown in the audit log (default %(default)s)")
    create.set_defaults(fn=Command("admin", "cmd_keys_create"))
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", type=int, help="the key's id (shown when it was created)")
    revoke.set_defaults(fn=Command("admin", "cmd_keys_revoke"))
    update = keys_sub.add_parser("update", help="give a key other scopes or another perfil")
    update.add_argument("id", type=int, help="the key's id")
    update.add_argument("--perfil", help="administrador | diretoria | funcionario")
    update.add_argument("--scopes", help="comma-separated, e.g. worker_automation:read")
    update.set_defaults(fn=Command("admin", "cmd_keys_update"))
    keys_sub.add_parser("list", help="every API key (prefix only, never the key)").set_defaults(
        fn=Command("operator", "cmd_keys_list")
    )

    clientes = sub.add_parser("clientes", help="client companies")
    clientes_sub = clientes.add_subparsers(dest="clientes_command", required=True, metavar="COMMAND")
    add = clientes_sub.add_parser("add", help="add a client (its id is the last line)")
    add.add_argument("--razao-social", required=True, help="the company's legal name")
    add.add_argument("--cnpj", default=None, help="14 digits, punctuation allowed (optional)")
    add.set_defaults(fn=Command("admin", "cmd_clientes_add"))

    machines = sub.add_parser("machines", help="registered worker machines")
    machines_sub = machines.add_subparsers(dest="machines_command", required=True, metavar="COMMAND")
    register = machines_sub.add_parser("register", help="register a machine (its key is the last line)")
    register.add_argument("--name", required=True, help="a unique name for the machine")
    target = register.add_mutually_exclusive_group(required=True)
    target.add_argument("--automation", help="the one automation a dedicated machine serves")
    target.add_argument("--queue", help="the queue a Celery pool worker serves")
    register.set_defaults(fn=Command("admin", "cmd_machines_register"))
    machines_sub.add_parser("list", help="list machines").set_defaults(
        fn=Command("admin", "cmd_machines_list")
    )
    for action in ("on", "off"):
        switch = machines_sub.add_parser(action, help=f"turn a machine {action}")
        switch.add_argument("id", type=int, help="the machine's id (see machines list)")
        switch.set_defaults(fn=Command("admin", "cmd_machines_switch"), action=action)

    dispatch = sub.add_parser("dispatch", help="create a job (its id is the last line)")
    dispatch.add_argument("automation", help="the automation's key, e.g. demo.sleep")
    dispatch.add_argument("--cliente", type=int, default=None, help="the client's id (optional)")
    dispatch.add_argument("--context", default="{}", help="the job's input, a JSON object (default {})")
    dispatch.add_argument(
        "--priority",
        type=_bounded(PRIORITY_MIN, PRIORITY_MAX),
        default=PRIORITY_MIN,
        help=f"{PRIORITY_MIN} (runs first) to {PRIORITY_MAX} (default %(default)s)",
    )
    dispatch.add_argument(
        "--idempotency-key",
        default=None,
        metavar="KEY",
        help="run again with the same KEY and the same job, prints the job made the first time "
        "and creates none (safe to repeat after a timeout or an error)",
    )
    dispatch.set_defaults(fn=Command("dispatch", "cmd_dispatch"))

    sub.add_parser(
        "reconcile", help="put right now the jobs no message will run or no process runs"
    ).set_defaults(fn=Command("dispatch", "cmd_reconcile"))

    seed = sub.add_parser("seed-demo", help="add demo clients and finished or queued jobs (none running)")
    seed.add_argument(
        "--jobs",
        type=_bounded(0, MAX_JOBS),
        default=3000,
        help=f"job rows to add, 0 to {MAX_JOBS} (default %(default)s)",
    )
    seed.add_argument(
        "--clientes",
        type=_bounded(0, MAX_CLIENTES),
        default=60,
        help="clients to have in all; only the missing ones are added (default %(default)s)",
    )
    seed.set_defaults(fn=Command("admin", "cmd_seed_demo"))
    _add_operator_commands(sub)
    return parser


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--status", help="only jobs in this state (AGENDADO, EXECUTANDO, CONCLUIDO, ...)")
    parser.add_argument("--queue", help="only jobs on this queue")
    parser.add_argument("--automation", help="only this automation (its key)")
    parser.add_argument("--cliente", type=int, help="only this client's jobs (id)")
    parser.add_argument("--usuario", type=int, help="only this user's jobs (id)")
    parser.add_argument("--task-id", help="the job with this task id")
    parser.add_argument(
        "--q", help="free text: task id, automation, client name, error message, a value of the context"
    )


def _add_operator_commands(sub: Any) -> None:
    """The operator commands: jobs, queues, schedules, prune."""
    jobs = sub.add_parser("jobs", help="list, show, retry and cancel jobs")
    jobs_sub = jobs.add_subparsers(dest="jobs_command", required=True)
    listing = jobs_sub.add_parser("list", help="jobs, newest first, filtered")
    _add_filters(listing)
    listing.add_argument("--page", type=_bounded(1), default=1, help="page number (from 1)")
    listing.add_argument(
        "--per-page", type=_bounded(1, MAX_PER_PAGE), default=20, help=f"jobs per page (1-{MAX_PER_PAGE})"
    )
    listing.add_argument(
        "--created-from", help="only jobs created at or after this ISO 8601 instant (no offset: WA_TIMEZONE)"
    )
    listing.add_argument("--created-to", help="only jobs created before this instant (exclusive)")
    listing.add_argument(
        "--order-by",
        metavar="FIELD[:asc|desc]",
        help="sort by created_at, finished_at, duration or priority (descending unless :asc; "
        "unfinished jobs last either way); default: newest first",
    )
    listing.set_defaults(fn=Command("operator", "cmd_jobs_list"))
    show = jobs_sub.add_parser("show", help="one job with its attempts")
    show.add_argument("id", type=int, help="job id")
    show.set_defaults(fn=Command("operator", "cmd_jobs_show"))
    for action, what in (
        ("retry", "queue again a failed or cancelled job, or every one the filters match"),
        ("cancel", "cancel a queued or running job, or every one the filters match"),
    ):
        act = jobs_sub.add_parser(action, help=what)
        act.add_argument("id", type=int, nargs="?", help="job id (or use the filters instead)")
        _add_filters(act)
        act.add_argument("--limit", type=int, default=None, help="at most this many jobs, newest first")
        act.set_defaults(fn=Command("operator", f"cmd_jobs_{action}"))

    automations = sub.add_parser(
        "automations",
        help="the automations there are, their queue and settings, and which ones this environment runs",
    )
    automations.add_argument(
        "--json", action="store_true", help="a JSON list, with each automation's context fields"
    )
    automations.set_defaults(fn=Command("automation_list", "cmd_automations"))

    processes = sub.add_parser(
        "processes",
        help="which processes run jobs: Celery pool workers (they answer inspect) and dedicated "
        "machines (their subscription is open), ONLINE, SILENT or GONE",
    )
    processes.add_argument("--json", action="store_true", help="a JSON list (the API's processes fields)")
    processes.set_defaults(fn=Command("process_list", "cmd_processes"))

    queues = sub.add_parser("queues", help="pause and resume queues")
    queues_sub = queues.add_subparsers(dest="queues_command", required=True)
    for action, what in (("pause", "accept the queue's jobs but run none"), ("resume", "run them again")):
        pause = queues_sub.add_parser(action, help=what)
        pause.add_argument("queue", help="queue name")
        pause.set_defaults(fn=Command("operator", "cmd_queues"), action=action)

    schedules = sub.add_parser("schedules", help="jobs created on a cron timetable")
    schedules_sub = schedules.add_subparsers(dest="schedules_command", required=True)
    schedules_sub.add_parser("list", help="every schedule").set_defaults(
        fn=Command("operator", "cmd_schedules_list")
    )
    add = schedules_sub.add_parser("add", help="create a schedule (its id is the last line)")
    add.add_argument("--automation", required=True, help="automation key of the jobs")
    add.add_argument("--cron", required=True, help="five-field cron expression, e.g. '0 6 * * 1-5'")
    add.add_argument("--cliente", type=int, default=None, help="client id of the jobs")
    add.add_argument("--context", default="{}", help="JSON object: the jobs' input")
    add.add_argument("--priority", type=int, default=PRIORITY_MIN, help=f"{PRIORITY_RANGE}, lower runs first")
    add.add_argument("--timezone", default=None, help="IANA zone of the cron (default: WA_TIMEZONE)")
    add.add_argument("--disabled", action="store_true", help="create it disabled")
    add.set_defaults(fn=Command("operator", "cmd_schedules_add"))
    rm = schedules_sub.add_parser("rm", help="delete a schedule (its jobs stay)")
    rm.add_argument("id", type=int, help="schedule id")
    rm.set_defaults(fn=Command("operator", "cmd_schedules_rm"))

    prune = sub.add_parser("prune", help="delete finished jobs older than N days, in batches")
    prune.add_argument(
        "--older-than-days", type=int, required=True, help="jobs that ended more than this many days ago"
    )
    prune.add_argument("--dry-run", action="store_true", help="count what would be deleted; delete nothing")
    prune.set_defaults(fn=Command("operator", "cmd_prune"))
