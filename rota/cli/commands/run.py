"""``rota run [--config FILE]``: the one-command start on the embedded default.

Migrates the database, applies the schedule file (``schedules.yaml`` in the
working directory by default), then runs one scheduler replica and one executor
in this process until SIGTERM/SIGINT, when the executor drains and releases
what is left and the scheduler stops. It also serves the API and dashboard
(``rota serve``) on 127.0.0.1:8080 unless ``--no-serve``; a busy port is one
log line, and ``rota run`` goes on without serving. The executor serves every pool that a
stored job type names, unless ``--pools`` says otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from typing import Any

from sqlalchemy import Engine

from rota.cli import bounds
from rota.cli.commands.executor import parse_pools
from rota.cli.commands.serve import access_for, add_allowed_host_option, serve_in_background
from rota.cli.common import (
    EXIT_OK,
    UserError,
    add_db_option,
    add_health_options,
    add_logging_options,
    configure_logging,
    health_server,
    install_stop_handlers,
    open_database,
    report_applied,
)
from rota.cli.listen_option import add_listen_option, use_listen_url
from rota.core.queries.job_types import load_job_types
from rota.executor.service import DEFAULT_CONCURRENCY, DEFAULT_DRAIN_TIMEOUT, Executor
from rota.migrations.runner import upgrade
from rota.runtime.events import emit
from rota.runtime.heap import settle_heap
from rota.runtime.outage import DatabaseUnusable, Outage
from rota.scheduler.apply import apply_file
from rota.scheduler.service import SchedulerService

DEFAULT_CONFIG = "schedules.yaml"
log = logging.getLogger("rota.run")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="migrate, apply, and run a scheduler and an executor in one process",
        description=(
            "The one-command start: migrate the database, apply the schedule file, then "
            "run one scheduler replica and one executor until SIGTERM/SIGINT."
        ),
    )
    add_db_option(p)
    add_listen_option(p)
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"the schedule file to apply (default: {DEFAULT_CONFIG} in the working directory)",
    )
    p.add_argument("--pools", metavar="A,B", help="pools to serve (default: every job type's)")
    p.add_argument(
        "--concurrency",
        type=bounds.CONCURRENCY,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"jobs run at once (default {DEFAULT_CONCURRENCY})",
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
        "--no-serve", action="store_true", help="do not serve the API and dashboard (rota serve)"
    )
    p.add_argument("--serve-host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    p.add_argument("--serve-port", type=bounds.PORT, default=8080, help="API port (default 8080)")
    add_allowed_host_option(p)
    add_logging_options(p)
    add_health_options(p)
    p.set_defaults(func=run)


def _config_path(args: argparse.Namespace) -> str:
    path: str = args.config or DEFAULT_CONFIG
    if not os.path.exists(path):
        where = "" if args.config else " (the default; pass --config FILE for another)"
        raise UserError(f"no schedule file {path}{where}")
    return path


def _pools(engine: Engine, args: argparse.Namespace) -> tuple[str, ...]:
    if args.pools:
        return parse_pools(args.pools)
    with engine.connect() as conn:
        pools = {spec.pool for spec in load_job_types(conn).values()}
    return tuple(sorted(pools | {"default"}))


def run(args: argparse.Namespace) -> int:
    path = _config_path(args)  # the numbers were checked as parsed (rota.cli.bounds)
    # A bad tokens file or --allowed-host stops rota run before anything starts.
    access = None if args.no_serve else access_for(args.serve_host, args.allowed_host)
    configure_logging(args)
    stop, hurry = threading.Event(), threading.Event()
    install_stop_handlers(stop, hurry)  # a second signal: hurry
    with health_server(args) as health, open_database(args, migrated=False) as engine:
        use_listen_url(engine, args)
        upgrade(engine)
        result = apply_file(engine, path)
        report_applied(result.render())
        pools = _pools(engine, args)
        interval = args.liveness_interval
        # One view of the database for both services: an outage is one line, not two.
        outage = Outage(log, secret_url=engine.url.render_as_string(hide_password=False))
        executor = Executor(
            engine,
            pools,
            args.concurrency,
            drain_timeout=args.drain_timeout,
            liveness_interval=interval,
            outage=outage,
        )
        scheduler = SchedulerService(engine, liveness_interval=interval, outage=outage)
        if health is not None:
            health.watch(executor.liveness, scheduler.liveness)
        emit(
            log,
            "run_started",
            db=engine.url.render_as_string(hide_password=True),
            config=path,
            pools=",".join(pools),
        )
        fatal: list[DatabaseUnusable] = []

        def run_scheduler() -> None:
            try:
                scheduler.run(stop)
            except DatabaseUnusable as exc:  # logged once; the executor stops too
                fatal.append(exc)
                stop.set()

        scheduler_thread = threading.Thread(
            target=run_scheduler, name="rota-scheduler", daemon=True
        )
        scheduler_thread.start()
        server = None
        if access is not None:
            server = serve_in_background(engine, args.serve_host, args.serve_port, access)
        settle_heap()
        try:
            executor.run(stop, hurry)
        finally:
            stop.set()
            scheduler_thread.join(timeout=10)
            if server is not None:
                server.stop()
        emit(log, "run_stopped")
    if fatal:
        raise fatal[0]
    return EXIT_OK
