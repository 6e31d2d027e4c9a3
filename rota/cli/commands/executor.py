"""``rota executor``: run one executor until SIGTERM/SIGINT (then drain and release)."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from rota.cli import bounds
from rota.cli.common import (
    EXIT_OK,
    UserError,
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
from rota.executor.service import (
    DEFAULT_CONCURRENCY,
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_SWEEP_INTERVAL,
    ENGINE_POOL,
    Executor,
)
from rota.executor.slots import HELD_AT_LEAST, PREFETCH_PER_SLOT
from rota.executor.upkeep import DEFAULT_REINDEX_INTERVAL
from rota.runtime.heap import settle_heap


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "executor",
        help="run one executor until SIGTERM/SIGINT",
        description=(
            "Claim due jobs of the given pools and run their handlers. Any number of "
            "executors may run against one database. SIGTERM/SIGINT: stop claiming, let "
            "running jobs finish for --drain-timeout, then hand the rest back to the queue; a "
            "second signal ends the drain at once."
        ),
    )
    add_db_option(p)
    add_listen_option(p)
    add_config_option(p)
    p.add_argument(
        "--pools", default="default", metavar="A,B", help="pools to serve (default: default)"
    )
    p.add_argument(
        "--concurrency",
        type=bounds.CONCURRENCY,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"jobs run at once by this process (default {DEFAULT_CONCURRENCY})",
    )
    p.add_argument(
        "--prefetch",
        type=bounds.PREFETCH,
        default=None,
        metavar="N",
        help="jobs claimed ahead of a free slot, waiting in this process, only while jobs are "
        f"short (default: {PREFETCH_PER_SLOT} x --concurrency, and at least {HELD_AT_LEAST} "
        "minus --concurrency); "
        "0 claims only for free slots",
    )
    p.add_argument(
        "--tenant-limit",
        type=bounds.TENANT_LIMIT,
        default=None,
        metavar="N",
        help="at most N running jobs per tenant, counted over all executors (default: no cap)",
    )
    p.add_argument(
        "--drain-timeout",
        type=bounds.DRAIN_TIMEOUT,
        default=DEFAULT_DRAIN_TIMEOUT,
        metavar="SECONDS",
        help="on shutdown, how long running jobs may finish before they are handed back "
        f"(default {DEFAULT_DRAIN_TIMEOUT:g}, inside Kubernetes' 30 s grace period); a second "
        "signal ends the drain at once",
    )
    p.add_argument(
        "--poll-interval",
        type=bounds.POLL_INTERVAL,
        default=DEFAULT_POLL_INTERVAL,
        metavar="SECONDS",
        help=f"idle polling interval (default {DEFAULT_POLL_INTERVAL:g}; "
        "PostgreSQL also wakes on NOTIFY)",
    )
    p.add_argument(
        "--sweep-interval",
        type=bounds.SWEEP_INTERVAL,
        default=DEFAULT_SWEEP_INTERVAL,
        metavar="SECONDS",
        help=f"how often expired leases are taken back (default {DEFAULT_SWEEP_INTERVAL:g})",
    )
    p.add_argument(
        "--no-index-upkeep",
        action="store_true",
        help="never rebuild bloated job-table indexes from this executor (PostgreSQL; by "
        "default an idle executor checks hourly and runs REINDEX INDEX CONCURRENTLY)",
    )
    add_logging_options(p)
    add_health_options(p)
    p.set_defaults(func=run)


def parse_pools(text: str) -> tuple[str, ...]:
    pools = tuple(p.strip() for p in text.split(",") if p.strip())
    if not pools:
        raise UserError(f"--pools {text!r}: name at least one pool, like --pools default,reports")
    return pools


def run(args: argparse.Namespace) -> int:
    pools = parse_pools(args.pools)  # the numbers were checked as parsed (rota.cli.bounds)
    configure_logging(args)
    stop, hurry = threading.Event(), threading.Event()
    install_stop_handlers(stop, hurry)  # a second signal: hurry
    with (
        health_server(args) as health,
        open_database(args, pool=ENGINE_POOL) as engine,
    ):
        use_listen_url(engine, args)
        executor = Executor(
            engine,
            pools,
            args.concurrency,
            tenant_limit=args.tenant_limit,
            prefetch=args.prefetch,
            poll_interval=args.poll_interval,
            sweep_interval=args.sweep_interval,
            drain_timeout=args.drain_timeout,
            liveness_interval=args.liveness_interval,
            reindex_interval=None if args.no_index_upkeep else DEFAULT_REINDEX_INTERVAL,
        )
        if health is not None:
            health.watch(executor.liveness)
        settle_heap()
        executor.run(stop, hurry)
    return EXIT_OK
