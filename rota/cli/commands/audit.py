"""``rota audit [--since D] [--actor NAME] [--limit N] [--json]``: who did what, newest first.

Every operator action from every entry point (the command line, the HTTP API,
the dashboard): cancel, replay (one row per job, bulk forms too), pause,
resume, trigger, backfill (one row per run, on the schedule) and prune (one
row per run, on the jobs it chose, in words). ``--since`` takes a duration
back from the database clock (``1h``, ``7d``) or an ISO-8601 instant;
``--actor`` the exact name recorded (``alice@host``, a token's name).
``--json`` prints a JSON list of ``{"at", "actor", "action", "target_kind",
"target", "reason", "detail"}``, the objects ``GET /audit`` answers.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rota.cli import bounds
from rota.cli.common import EXIT_OK, add_db_option, checked_arg, open_database
from rota.cli.filters import parse_since
from rota.cli.status import audit_json, audit_table
from rota.core.operator_notes import ACTOR_MAX_CHARS
from rota.core.queries.jobs_read import database_now
from rota.core.queries.operator_actions import audit_entry, newest_actions

TABLE_LIMIT = 100


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="list operator actions (who cancelled, replayed, paused, ... what, when, why)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument(
        "--since",
        metavar="D|ISO",
        help="at or after: a duration ago (1h, 30m, 2d) or an ISO-8601 instant",
    )
    p.add_argument("--actor", metavar="NAME", help="only this actor's actions")
    p.add_argument(
        "--limit",
        type=bounds.AUDIT_LIMIT,
        metavar="N",
        help=f"newest N actions (default: {TABLE_LIMIT} in the table, all with --json)",
    )
    p.add_argument("--json", action="store_true", help="as a JSON list")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    actor = None if args.actor is None else checked_arg("--actor", args.actor, ACTOR_MAX_CHARS)
    limit = args.limit if args.limit is not None else (None if args.json else TABLE_LIMIT)
    with open_database(args) as engine, engine.connect() as conn:
        since = parse_since(args.since, database_now(conn)) if args.since else None
        rows = newest_actions(conn, since=since, actor=actor, limit=limit)
    entries = [audit_entry(r) for r in rows]
    if args.json:
        print(json.dumps([audit_json(e) for e in entries], indent=2))
        return EXIT_OK
    if not entries:
        print("no operator actions" + (" match" if args.since or actor is not None else ""))
        return EXIT_OK
    print(audit_table(entries))
    if limit is not None and len(entries) == limit:
        print(f"(the newest {limit} shown; --limit N for more)", file=sys.stderr)
    return EXIT_OK
