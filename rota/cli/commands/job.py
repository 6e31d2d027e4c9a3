"""``rota job ID``: one job, what it is doing, its attempt history and operator actions.

ID is the job's id or a unique prefix of it (at least 8 hex digits).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rota.cli.common import UserError, add_db_option, open_database
from rota.cli.status import action_json, attempt_json, job_detail, job_json
from rota.core.queries.job_ids import JobRefError, resolve_job_id
from rota.core.queries.jobs_read import database_now, get_attempts, get_job
from rota.core.queries.operator_actions import actions_of_job


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("job", help="show one job")
    p.add_argument("job_id", metavar="ID", help="the job's id, or at least 8 of its first digits")
    p.add_argument("--json", action="store_true")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_database(args) as engine, engine.connect() as conn:
        try:
            job_id = resolve_job_id(conn, args.job_id)
        except JobRefError as exc:
            raise UserError(str(exc)) from None
        now = database_now(conn)
        job = get_job(conn, job_id)
        if job is None:  # pruned since the lookup
            raise UserError(f"no job {job_id}")
        attempts = get_attempts(conn, job_id)
        actions = actions_of_job(conn, job_id)
    if args.json:
        data = job_json(job, now)
        data["attempts"] = [attempt_json(a) for a in attempts]
        data["operator_actions"] = [action_json(a) for a in actions]
        print(json.dumps(data, indent=2))
    else:
        print(job_detail(job, attempts, now, actions))
    return 0
