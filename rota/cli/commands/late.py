"""``rota late [--schedule S] [--since D] [--limit N] [--json]``: late occurrences, newest first.

An occurrence of a schedule with a ``deadline`` is late when its job was not
SUCCEEDED by ``instant + deadline``; its reason is ``not_finished``,
``failed``, ``cancelled``, ``skipped:<reason>``, ``paused`` or ``set_aside``
(docs: schedule-file, deadline). ``--since`` takes a duration back from the
database clock (``1h``, ``7d``) or an ISO-8601 instant, and keeps the
occurrences scheduled at or after it. ``--json`` prints a JSON list of
``{"schedule", "instant", "deadline", "reason", "job_id", "detected_at",
"finished_at"}``, the objects ``GET /late`` answers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rota.cli import bounds
from rota.cli.common import EXIT_OK, UserError, add_db_option, checked_arg, open_database
from rota.cli.filters import parse_since
from rota.core.queries.jobs_read import database_now
from rota.core.queries.late_occurrences import newest_late
from rota.core.queries.schedules import get_schedule, schedule_names
from rota.scheduler.deadlines import late_json

TABLE_LIMIT = 100


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "late",
        help="list late occurrences: not SUCCEEDED by their schedule's deadline, and why",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument("--schedule", metavar="NAME", help="only this schedule's")
    p.add_argument(
        "--since",
        metavar="D|ISO",
        help="scheduled at or after: a duration ago (1h, 30m, 2d) or an ISO-8601 instant",
    )
    p.add_argument(
        "--limit",
        type=bounds.AUDIT_LIMIT,
        metavar="N",
        help=f"newest N (default: {TABLE_LIMIT} in the table, all with --json)",
    )
    p.add_argument("--json", action="store_true", help="as a JSON list")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    name = None if args.schedule is None else checked_arg("--schedule", args.schedule)
    limit = args.limit if args.limit is not None else (None if args.json else TABLE_LIMIT)
    with open_database(args) as engine, engine.connect() as conn:
        if name is not None and get_schedule(conn, name) is None:
            from rota.operations.schedules import UnknownSchedule  # only on this error path

            raise UserError(f"--schedule: {UnknownSchedule(name, schedule_names(conn))}")
        since = parse_since(args.since, database_now(conn)) if args.since else None
        rows = newest_late(conn, schedule=name, since=since, limit=limit)
    items = [late_json(r) for r in rows]
    if args.json:
        print(json.dumps(items, indent=2))
        return EXIT_OK
    if not items:
        print("no late occurrences" + (" match" if args.since or name is not None else ""))
        return EXIT_OK
    print(table(items))
    if limit is not None and len(items) == limit:
        print(f"(the newest {limit} shown; --limit N for more)", file=sys.stderr)
    return EXIT_OK


def table(items: Sequence[Mapping[str, Any]]) -> str:
    """One line per late occurrence; the job last (``-`` when none was made)."""
    rows = [
        (
            _short(i["instant"]),
            i["schedule"],
            i["reason"],
            _short(i["deadline"]),
            _short(i["detected_at"]),
            _short(i["finished_at"]) or "-",
            i["job_id"] or "-",
        )
        for i in items
    ]
    header = ("INSTANT", "SCHEDULE", "REASON", "DEADLINE", "DETECTED", "FINISHED", "JOB")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for r in [header, *rows]:
        padded = [f"{cell:{width}}" for cell, width in zip(r[:-1], widths, strict=True)]
        lines.append("  ".join([*padded, r[-1]]))
    return "\n".join(lines)


def _short(value: str | None) -> str:
    """An instant to the second: ``2026-03-02T00:02:00Z``."""
    return "" if value is None else value.split(".")[0].rstrip("Z") + "Z"
