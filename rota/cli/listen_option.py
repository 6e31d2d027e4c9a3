"""``--listen-db URL`` (``$ROTA_LISTEN_URL``): the URL of the LISTEN connections.

Taken by the long-running commands (executor, scheduler, run, serve), so one set
of flags fits every process kind of a deployment behind a transaction pooler.
``serve`` holds no LISTEN connection today: it accepts the flag and ignores it.
"""

from __future__ import annotations

import argparse

from sqlalchemy import Engine

from rota.cli.common import UserError
from rota.core.database import BadDatabaseSetting
from rota.core.listening import resolve_listen_url, set_listen_url


def add_listen_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--listen-db",
        metavar="URL",
        help="PostgreSQL: a direct or session-pooled URL used only for LISTEN (fast wake-ups "
        "while --db goes through a transaction pooler; default: $ROTA_LISTEN_URL, else --db)",
    )


def use_listen_url(engine: Engine, args: argparse.Namespace) -> None:
    """Point ``engine``'s LISTEN connections at ``--listen-db`` / ``$ROTA_LISTEN_URL``."""
    try:
        set_listen_url(engine, resolve_listen_url(getattr(args, "listen_db", None)))
    except BadDatabaseSetting as exc:
        raise UserError(f"--listen-db / ROTA_LISTEN_URL: {exc}") from None
