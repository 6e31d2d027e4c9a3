"""``rota enqueue JOB_TYPE``: create an ad-hoc job and print its id."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from rota.cli import bounds
from rota.cli.common import (
    RuntimeFailure,
    UserError,
    add_config_option,
    add_db_option,
    open_database,
)
from rota.core.timefmt import parse_instant
from rota.producer.enqueue import QueueFull, UnknownJobType, enqueue


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser("enqueue", help="create an ad-hoc job")
    p.add_argument("job_type", metavar="JOB_TYPE")
    p.add_argument("--payload-ref", metavar="R")
    p.add_argument("--args", metavar="JSON", help='a JSON object, like \'{"region": "eu"}\'')
    p.add_argument("--dedup-key", metavar="K", help="a second job with this key is not created")
    p.add_argument(
        "--run-after",
        metavar="ISO",
        help="not before this instant (no offset: UTC, as every CLI instant; default: now)",
    )
    p.add_argument(
        "--priority", type=bounds.PRIORITY, help="0 runs first (default: the job type's)"
    )
    p.add_argument("--tenant", help="counts against the executors' per-tenant cap")
    p.add_argument("--concurrency-key", help="at most one running job per key")
    p.add_argument("--max-attempts", type=bounds.MAX_ATTEMPTS, help="default: the job type's")
    add_db_option(p)
    add_config_option(p)
    p.set_defaults(func=run)


def _parse_args_json(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"--args: not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise UserError("--args: nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, or an integer of more than 4,300 digits
        raise UserError(f"--args: {str(exc).split(':')[0]}") from None
    if not isinstance(value, dict):
        raise UserError('--args: must be a JSON object, like \'{"region": "eu"}\'')
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def run(args: argparse.Namespace) -> int:
    job_args = _parse_args_json(args.args)
    try:
        run_after = parse_instant(args.run_after) if args.run_after else None
    except ValueError as exc:
        raise UserError(f"--run-after: {exc}") from None
    if args.max_attempts is not None and args.max_attempts < 1:
        raise UserError("--max-attempts: must be at least 1")
    with open_database(args) as engine, engine.begin() as conn:
        return _enqueue(conn, args, job_args, run_after)


def _enqueue(
    conn: Connection,
    args: argparse.Namespace,
    job_args: dict[str, Any] | None,
    run_after: datetime | None,
) -> int:
    try:
        result = enqueue(
            conn,
            args.job_type,
            payload_ref=args.payload_ref,
            args=job_args,
            dedup_key=args.dedup_key,
            run_after=run_after,
            priority=args.priority,
            tenant=args.tenant,
            concurrency_key=args.concurrency_key,
            max_attempts=args.max_attempts,
        )
    except (UnknownJobType, ValueError) as exc:
        raise UserError(str(exc)) from None
    except QueueFull as exc:  # backpressure: the job type's limits refuse it for now
        raise RuntimeFailure(str(exc)) from None
    print(result.job_id)
    return 0
