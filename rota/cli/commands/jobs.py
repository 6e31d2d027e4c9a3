"""``rota jobs``: list jobs, newest first, each with a line saying what it is doing.

Filters: ``--state FAILED,RETRY_WAIT``, ``--type T``, ``--schedule NAME``,
``--since 1h`` (or an ISO instant); see ``rota.cli.filters``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rota.cli import bounds
from rota.cli.common import add_db_option, open_database
from rota.cli.filters import add_filter_options, job_filter
from rota.cli.status import job_json, jobs_table
from rota.core.queries.jobs_read import database_now, list_jobs

TABLE_LIMIT = 100
MAX_LIMIT = bounds.JOBS_LIMIT.high


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("jobs", help="list jobs")
    add_filter_options(p)
    p.add_argument(
        "--limit",
        type=bounds.JOBS_LIMIT,
        metavar="N",
        help=f"newest N jobs (default: {TABLE_LIMIT} in the table, all with --json)",
    )
    p.add_argument("--json", action="store_true", help="every matching job, as a JSON list")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    limit = args.limit if args.limit is not None else (None if args.json else TABLE_LIMIT)
    with open_database(args) as engine, engine.connect() as conn:
        where = job_filter(conn, args)
        now = database_now(conn)
        rows = list_jobs(conn, where=where, limit=limit)
    if args.json:
        print(json.dumps([job_json(r, now) for r in rows], indent=2))
    else:
        print(jobs_table(rows, now))
        if limit is not None and len(rows) == limit:
            print(f"(the newest {limit} shown; --limit N for more)", file=sys.stderr)
    return 0
