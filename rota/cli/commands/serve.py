"""``rota serve [--host 127.0.0.1] [--port 8080]``: the HTTP API, metrics and dashboard.

Stateless: run as many as you like, each on the same database. With
``ROTA_API_TOKEN`` set every request but ``/healthz`` and ``/readyz`` must
carry ``Authorization: Bearer <token>``; without it only a loopback address
may be bound.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from rota.cli import bounds
from rota.cli.common import (
    EXIT_OK,
    RuntimeFailure,
    UserError,
    add_db_option,
    add_logging_options,
    configure_logging,
    install_stop_handlers,
    open_database,
)
from rota.runtime.events import emit

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from rota.api.server import BackgroundServer

TOKEN_ENV = "ROTA_API_TOKEN"
log = logging.getLogger("rota.api")


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the HTTP API, /metrics and the dashboard",
        description=(
            "Serve the HTTP API (POST /jobs, GET /jobs/{id}, schedules), Prometheus "
            "metrics at /metrics and the dashboard at /. Set ROTA_API_TOKEN to require "
            "Authorization: Bearer <token> (and to bind a non-loopback address)."
        ),
    )
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=bounds.PORT, default=None, help="port to bind (default 8080)")
    add_db_option(p)
    add_logging_options(p)
    p.set_defaults(func=run)


def api_token() -> str | None:
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def run(args: argparse.Namespace) -> int:
    from rota.api import create_app
    from rota.api.server import (
        DEFAULT_HOST,
        DEFAULT_PORT,
        BindRefused,
        bind,
        check_bind,
        make_server,
    )

    host = args.host if args.host is not None else DEFAULT_HOST
    port = args.port if args.port is not None else DEFAULT_PORT
    token = api_token()
    try:
        check_bind(host, token)
    except BindRefused as exc:
        raise UserError(str(exc)) from None
    configure_logging(args)
    with open_database(args) as engine:
        try:
            sock = bind(host, port)
        except OSError as exc:
            raise RuntimeFailure(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
        bound_port = sock.getsockname()[1]
        emit(
            log,
            "serve_started",
            address=f"http://{host}:{bound_port}",
            auth="token" if token else "none (loopback only)",
        )
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again
        # for the handler it found: ours, so the process exits 0 (not killed by it).
        install_stop_handlers(threading.Event())
        try:
            make_server(create_app(engine, token=token)).run(sockets=[sock])
        finally:
            sock.close()
    return EXIT_OK


def serve_in_background(engine: Engine, host: str, port: int) -> BackgroundServer | None:
    """``rota run``'s API and dashboard, from a thread; None (and one log line) if it cannot.

    A busy port or a refused address never stops ``rota run``: it goes on
    without serving.
    """
    from rota.api import create_app
    from rota.api.server import BackgroundServer, BindRefused, bind, check_bind

    token = api_token()
    try:
        check_bind(host, token)
        sock = bind(host, port)
    except BindRefused as exc:
        emit(log, "serve_skipped", logging.WARNING, reason=str(exc))
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        emit(log, "serve_skipped", logging.WARNING, address=f"{host}:{port}", reason=reason)
        return None
    server = BackgroundServer(create_app(engine, token=token), sock)
    server.start()
    emit(log, "serve_started", address=f"http://{host}:{sock.getsockname()[1]}")
    return server
