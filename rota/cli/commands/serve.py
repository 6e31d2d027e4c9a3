"""``rota serve [--host 127.0.0.1] [--port 8080] [--allowed-host NAME]``: the HTTP API,
metrics and dashboard.

Stateless: run as many as you like, each on the same database. With a token
(``ROTA_API_TOKEN``, an admin named ``default``, and the named tokens with roles of
``ROTA_API_TOKENS_FILE``) every request but ``/healthz`` and ``/readyz`` must carry
one; without any, only a loopback address may be bound. A bad tokens file or
``--allowed-host`` stops it before it binds (exit 2). The Host names answered:
``rota.api.browser``.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from dataclasses import dataclass
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
from rota.cli.listen_option import add_listen_option
from rota.runtime.events import emit
from rota.runtime.heap import settle_heap

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from rota.api.browser import HostPolicy
    from rota.api.identities import TokenTable
    from rota.api.server import BackgroundServer

TOKEN_ENV = "ROTA_API_TOKEN"
TOKENS_FILE_ENV = "ROTA_API_TOKENS_FILE"
ALLOWED_HOSTS_ENV = "ROTA_ALLOWED_HOSTS"
log = logging.getLogger("rota.api")


def add_allowed_host_option(p: argparse.ArgumentParser) -> None:
    """``--allowed-host``, for ``serve`` and ``run``."""
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="a Host name the API answers for besides the address it binds (localhost "
        "names on loopback); repeat or comma-separate; default $ROTA_ALLOWED_HOSTS. "
        "Bound to 0.0.0.0 or :: with a token, any Host is answered unless names are given",
    )


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the HTTP API, /metrics and the dashboard",
        description=(
            "Serve the HTTP API (POST /jobs, GET /jobs/{id}, schedules), Prometheus "
            "metrics at /metrics and the dashboard at /. Set ROTA_API_TOKEN (an admin) or "
            "ROTA_API_TOKENS_FILE (named tokens with roles, by their sha256) to require "
            "Authorization: Bearer <token> (and to bind a non-loopback address)."
        ),
    )
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=bounds.PORT, default=None, help="port to bind (default 8080)")
    add_allowed_host_option(p)
    add_db_option(p)
    add_listen_option(p)
    add_logging_options(p)
    p.set_defaults(func=run)


def api_token() -> str | None:
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


@dataclass(frozen=True)
class Access:
    """Who may use the API (the tokens) and under which Host names it answers."""

    tokens: TokenTable
    hosts: HostPolicy

    @property
    def token_required(self) -> bool:
        return not self.tokens.empty

    @property
    def auth(self) -> str:
        """For the serve_started line: how many tokens, never a token or a hash."""
        return f"tokens ({len(self.tokens.names)})" if self.token_required else "none"


def access_for(host: str, allowed: list[str]) -> Access:
    """The tokens and the Host policy of a serve bound to ``host``; ``UserError`` if bad."""
    from rota.api.browser import AllowedHostError, HostPolicy, parse_allowed_hosts
    from rota.api.identities import TokensFileError, token_table

    tokens_file = os.environ.get(TOKENS_FILE_ENV, "").strip() or None
    try:
        tokens = token_table(api_token(), tokens_file)
    except TokensFileError as exc:
        raise UserError(f"{TOKENS_FILE_ENV} is refused:\n" + "\n".join(exc.problems)) from None
    from_env = os.environ.get(ALLOWED_HOSTS_ENV, "").strip()
    given = allowed or ([from_env] if from_env else [])
    try:
        names = parse_allowed_hosts(given)
    except AllowedHostError as exc:
        raise UserError(str(exc)) from None
    return Access(tokens, HostPolicy.for_bind(host, names, token_required=not tokens.empty))


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
    access = access_for(host, args.allowed_host)
    try:
        check_bind(host, access.token_required)
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
            auth=access.auth,
            hosts=access.hosts.describe(),
        )
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again
        # for the handler it found: ours, so the process exits 0 (not killed by it).
        install_stop_handlers(threading.Event())
        try:
            app = create_app(engine, tokens=access.tokens, hosts=access.hosts)
            settle_heap()
            make_server(app).run(sockets=[sock])
        finally:
            sock.close()
    return EXIT_OK


def serve_in_background(
    engine: Engine, host: str, port: int, access: Access
) -> BackgroundServer | None:
    """``rota run``'s API and dashboard, from a thread; None (and one log line) if it cannot.

    A busy port or a refused address never stops ``rota run``: it goes on
    without serving. (A bad tokens file or ``--allowed-host`` does, earlier:
    ``access_for`` runs before anything starts.)
    """
    from rota.api import create_app
    from rota.api.server import BackgroundServer, BindRefused, bind, check_bind

    try:
        check_bind(host, access.token_required)
        sock = bind(host, port)
    except BindRefused as exc:
        emit(log, "serve_skipped", logging.WARNING, reason=str(exc))
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        emit(log, "serve_skipped", logging.WARNING, address=f"{host}:{port}", reason=reason)
        return None
    server = BackgroundServer(create_app(engine, tokens=access.tokens, hosts=access.hosts), sock)
    server.start()
    address = f"http://{host}:{sock.getsockname()[1]}"
    emit(log, "serve_started", address=address, auth=access.auth, hosts=access.hosts.describe())
    return server
