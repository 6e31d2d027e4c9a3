"""LISTEN connections: which URL they use, and the probe that proves they work.

A transaction pooler (PgBouncer with ``pool_mode = transaction``) lends each
transaction whichever server connection is free. A ``LISTEN`` runs on one
server connection, which goes back to the pool when the statement ends, and
notifications never reach the client again. Nothing fails: wake-ups simply
stop. So every LISTEN connection proves itself before it is trusted: it also
listens on a channel of its own (``rota_probe_<random>``), sends one NOTIFY
there through the engine (the path an ``enqueue`` takes) and waits up to
``PROBE_SECONDS`` for it. A probe that does not come back means notifications
do not arrive: the caller stops listening and polls.

``ROTA_LISTEN_URL`` (``--listen-db``) names a direct or session-pooled URL used
only for LISTEN, so wake-ups stay instant while everything else goes through
the transaction pooler. Without it, LISTEN uses the database URL.

The channel names come from the schema the engine's connections work in
(``current_schema()`` asked through the engine), not from the LISTEN
connection's own search_path: a listen URL need not carry the schema.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

import psycopg
from sqlalchemy import Engine, text

from rota.core.database import (
    BadDatabaseSetting,
    channel,
    libpq_dsn,
    parse_url,
    resolve_url,
    schema_of,
    with_schema,
)

# The engine execution option that carries the listen URL (libpq form).
LISTEN_URL_OPTION = "rota_listen_url"
# A notification sent and received on one server takes milliseconds; this much
# silence means it cannot arrive at all.
PROBE_SECONDS = 5.0
# How often a process whose notifications cannot arrive looks for work instead.
POLL_SECONDS = 1.0
LISTEN_URL_HINT = (
    "set ROTA_LISTEN_URL (or --listen-db) to a direct or session-pooled URL for LISTEN"
)


def resolve_listen_url(cli_value: str | None, environ: dict[str, str] | None = None) -> str | None:
    """``--listen-db`` wins over ``ROTA_LISTEN_URL``; None: LISTEN on the database URL."""
    env = os.environ if environ is None else environ
    value = (cli_value or "").strip() or env.get("ROTA_LISTEN_URL", "").strip()
    return resolve_url(value) if value else None


def set_listen_url(engine: Engine, url: str | None) -> None:
    """Make ``engine``'s LISTEN connections use ``url`` (None: the engine's own URL).

    A listen URL is for PostgreSQL only; it gets the engine's schema too, so a
    direct URL lands in the same search_path as the engine's connections.
    """
    if url is None or engine.dialect.name != "postgresql":
        return
    parsed = parse_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise BadDatabaseSetting("ROTA_LISTEN_URL / --listen-db must be a PostgreSQL URL")
    parsed = with_schema(parsed, schema_of(engine.url))
    dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    engine.update_execution_options(**{LISTEN_URL_OPTION: dsn})


def listen_url_given(engine: Engine) -> bool:
    return bool(engine.get_execution_options().get(LISTEN_URL_OPTION))


def listen_dsn(engine: Engine) -> str:
    """The libpq URL LISTEN connections of ``engine`` open: never for output."""
    given = engine.get_execution_options().get(LISTEN_URL_OPTION)
    return str(given) if given else libpq_dsn(engine)


def engine_channel(engine: Engine, prefix: str) -> str:
    """The NOTIFY channel of ``prefix`` for the schema the engine's connections use."""
    with engine.connect() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar()
    return channel(prefix, None if schema is None else str(schema))


class Probe:
    """One NOTIFY a LISTEN connection sends itself through the engine, and waits for."""

    def __init__(self) -> None:
        self.channel = f"rota_probe_{secrets.token_hex(8)}"
        self._token = secrets.token_hex(8)
        self._deadline: float | None = None
        self.arrived = False

    def listen_and_send(self, conn: psycopg.Connection[Any], engine: Engine) -> None:
        conn.execute(f"LISTEN {self.channel}")
        self.arrived = False
        self._token = secrets.token_hex(8)
        with engine.connect() as sender:
            sender.execute(
                text("SELECT pg_notify(:channel, :token)"),
                {"channel": self.channel, "token": self._token},
            )
            sender.commit()
        self._deadline = time.monotonic() + PROBE_SECONDS

    def consumes(self, notify: psycopg.Notify) -> bool:
        """True for the probe's own notification (it wakes nothing)."""
        if notify.channel != self.channel:
            return False
        if notify.payload == self._token:
            self.arrived = True
        return True

    def failed(self) -> bool:
        """The probe was sent and has not arrived in time."""
        return not self.arrived and self._deadline is not None and time.monotonic() > self._deadline

    def pending(self) -> bool:
        return not self.arrived and self._deadline is not None
