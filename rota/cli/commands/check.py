"""``rota check FILE``: validate a schedule file; no database needed.

Exit 0 with ``ok: N schedules, M job types``, or 2 with one ``file:line: message``
line per problem on stderr. ``--import-handlers`` also imports every job type's
handler and reconcile hook (as an executor started here would, the working
directory included) and reports each that does not import at the line of its
value: the check to run in a new image before a rolling deploy.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rota.cli.common import EXIT_BAD_INPUT, EXIT_OK, add_db_option
from rota.core.config import ScheduleFile
from rota.scheduler.schedule_file.errors import ConfigError, Problem
from rota.scheduler.schedule_file.loader import load_schedule_file


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "check", help="validate a schedule file (no database needed)"
    )
    p.add_argument("file", metavar="FILE", help="the schedule file (YAML)")
    p.add_argument(
        "--import-handlers",
        action="store_true",
        help="also import each job type's handler and reconcile hook here (this runs "
        "their modules' top-level code); exit 2 naming each that does not import",
    )
    add_db_option(p)  # accepted like every command's; this one needs no database
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        loaded = load_schedule_file(args.file)
    except ConfigError as exc:
        print_problems(exc)
        return EXIT_BAD_INPUT
    if args.import_handlers:
        problems = handler_problems(loaded)
        if problems:
            print_problems(ConfigError(problems))
            return EXIT_BAD_INPUT
    summary = f"ok: {len(loaded.schedules)} schedules, {len(loaded.job_types)} job types"
    if loaded.notifications:
        summary += f", {len(loaded.notifications)} notifications"
    print(summary)
    for name, target in loaded.notifications.items():
        print(f"  notification {name}: {target.describe()}")
    if args.import_handlers:
        count = sum(
            (s.handler is not None and s.command is None) + (s.reconcile is not None)
            for s in loaded.job_types.values()
        )
        print(f"ok: {count} handler{'s' if count != 1 else ''} import{'s' if count == 1 else ''}")
    return EXIT_OK


def handler_problems(loaded: ScheduleFile) -> list[Problem]:
    """One problem per handler or reconcile hook that does not import, at its value's line."""
    from rota.executor.handlers import HandlerRegistry
    from rota.executor.importable import import_problems

    registry = HandlerRegistry()
    found: list[Problem] = []
    for name, spec in loaded.job_types.items():
        lines = loaded.job_type_lines.get(name, {})
        for field, why in import_problems(spec, registry).items():
            path = spec.handler if field == "handler" else spec.reconcile
            line = lines.get(field, lines.get("name", 1))
            message = f"job type {name!r}: {field} {path} cannot be loaded here: {why}"
            found.append(Problem(loaded.path, line, message))
    return found


def print_problems(exc: ConfigError) -> None:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
