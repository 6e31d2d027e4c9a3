"""``rota jobs``: list jobs, newest first, each with a line saying what it is doing."""

from __future__ import annotations

import argparse
import json
from typing import Any

from cli.common import add_db_option, open_database
from cli.status import job_json, jobs_table
from shared.queries.jobs_read import database_now, list_jobs
from shared.states import ALL_STATES


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("jobs", help="list jobs")
    p.add_argument(
        "--state",
        choices=ALL_STATES,
        type=str.upper,
        metavar="S",
        help="one of " + ", ".join(ALL_STATES),
    )
    p.add_argument("--schedule", metavar="NAME")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--json", action="store_true")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine, engine.connect() as conn:
        now = database_now(conn)
        rows = list_jobs(conn, state=args.state, schedule=args.schedule, limit=args.limit)
    if args.json:
        print(json.dumps([job_json(r, now) for r in rows], indent=2))
    else:
        print(jobs_table(rows, now))
    return 0
