"""``rota scheduler [--config FILE]``: run one scheduler replica until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from rota.cli import bounds
from rota.cli.common import (
    EXIT_OK,
    add_config_option,
    add_db_option,
    add_health_options,
    add_logging_options,
    configure_logging,
    health_server,
    install_stop_handlers,
    open_database,
)
from rota.cli.listen_option import add_listen_option, use_listen_url
from rota.runtime.heap import settle_heap
from rota.scheduler.service import DEFAULT_MAX_SLEEP, SchedulerService
from rota.scheduler.tick import DEFAULT_BATCH_JOBS, DEFAULT_BATCH_SCHEDULES


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "scheduler",
        help="run one scheduler replica until SIGTERM/SIGINT",
        description=(
            "Turn due occurrences into jobs. Any number of replicas may run against "
            "one database: each occurrence becomes exactly one job."
        ),
    )
    add_db_option(p)
    add_listen_option(p)
    add_config_option(p)
    p.add_argument(
        "--batch",
        type=bounds.SCHEDULER_BATCH,
        default=DEFAULT_BATCH_SCHEDULES,
        metavar="N",
        help=f"due schedules locked per transaction (default {DEFAULT_BATCH_SCHEDULES})",
    )
    p.add_argument(
        "--max-jobs",
        type=bounds.SCHEDULER_MAX_JOBS,
        default=DEFAULT_BATCH_JOBS,
        metavar="N",
        help=f"jobs made per transaction (default {DEFAULT_BATCH_JOBS})",
    )
    p.add_argument(
        "--max-sleep",
        type=bounds.MAX_SLEEP,
        default=DEFAULT_MAX_SLEEP,
        metavar="SECONDS",
        help=f"longest sleep between ticks (default {DEFAULT_MAX_SLEEP})",
    )
    add_logging_options(p)
    add_health_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_logging(args)
    stop = threading.Event()
    install_stop_handlers(stop)
    with health_server(args) as health, open_database(args) as engine:
        use_listen_url(engine, args)
        service = SchedulerService(
            engine,
            batch_schedules=args.batch,
            batch_jobs=args.max_jobs,
            max_sleep=args.max_sleep,
            liveness_interval=args.liveness_interval,
        )
        if health is not None:
            health.watch(service.liveness)
        settle_heap()
        service.run(stop)
    return EXIT_OK
