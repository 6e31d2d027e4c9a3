"""``rota job ID``: one job, what it is doing, and its attempt history."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from rota.cli.common import UserError, add_db_option, open_database
from rota.cli.status import attempt_json, job_detail, job_json
from rota.shared.queries.jobs_read import database_now, get_attempts, get_job


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("job", help="show one job")
    p.add_argument("job_id", metavar="ID")
    p.add_argument("--json", action="store_true")
    add_db_option(p)
    p.set_defaults(func=run)


def parse_job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise UserError(f"{text!r} is not a job id (a UUID, as `rota jobs` prints)") from None


def run(args: argparse.Namespace) -> int:
    job_id = parse_job_id(args.job_id)
    with open_database(args) as engine, engine.connect() as conn:
        now = database_now(conn)
        job = get_job(conn, job_id)
        if job is None:
            raise UserError(f"no job {job_id}")
        attempts = get_attempts(conn, job_id)
    if args.json:
        data = job_json(job, now)
        data["attempts"] = [attempt_json(a) for a in attempts]
        print(json.dumps(data, indent=2))
    else:
        print(job_detail(job, attempts, now))
    return 0
