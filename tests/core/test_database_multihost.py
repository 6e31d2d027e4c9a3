"""Multi-host PostgreSQL URLs (failover): parsed into libpq's form, shown without a password.

libpq tries the hosts in order and, with ``target_session_attrs=read-write``,
keeps the writable one. The engine (SQLAlchemy) and the LISTEN connections
(psycopg, from the rendered engine URL) must both understand the URL, in each
of the three spellings accepted; the chaos soak's ``--failover`` relies on it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from rota.cli.main import main
from rota.core.database import BadDatabaseSetting, display_url, make_engine, parse_url

SECRET = "S3cretPassw0rd"


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A port nothing listens on: bound for the whole test, never listening, so a
    connection is refused at once and no other process (another xdist worker) can
    take it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def _spellings(dead: int, live: int, db: str) -> list[str]:
    tail = "target_session_attrs=read-write"
    return [
        f"postgresql+psycopg://u:{SECRET}@/{db}?host=127.0.0.1,127.0.0.1&port={dead},{live}&{tail}",
        f"postgresql+psycopg://u:{SECRET}@/{db}?host=127.0.0.1:{dead}&host=127.0.0.1:{live}&{tail}",
        f"postgresql+psycopg://u:{SECRET}@/{db}?host=127.0.0.1:{dead},127.0.0.1:{live}&{tail}",
    ]


@pytest.mark.parametrize("form", [0, 1, 2])
def test_every_spelling_becomes_libpqs_form_and_is_shown_readably(form: int) -> None:
    url = _spellings(5001, 5002, "rota")[form]
    parsed = parse_url(url)
    assert parsed.query["host"] == "127.0.0.1,127.0.0.1"
    assert parsed.query["port"] == "5001,5002"
    shown = display_url(url)
    assert shown == (
        "postgresql+psycopg://u:***@/rota?host=127.0.0.1:5001,127.0.0.1:5002"
        "&target_session_attrs=read-write"
    )
    assert SECRET not in shown


def test_one_port_for_every_host_and_ipv6_in_brackets() -> None:
    parsed = parse_url("postgresql+psycopg://u@/rota?host=a,b&port=6432")
    assert (parsed.query["host"], parsed.query["port"]) == ("a,b", "6432")
    assert display_url(parsed) == "postgresql+psycopg://u@/rota?host=a:6432,b:6432"
    v6 = parse_url("postgresql+psycopg://u@/rota?host=[::1]:5432,db2:5433")
    assert (v6.query["host"], v6.query["port"]) == ("::1,db2", "5432,5433")
    assert display_url(v6) == "postgresql+psycopg://u@/rota?host=[::1]:5432,db2:5433"


@pytest.mark.parametrize(
    "query",
    [
        "host=a:5432,b",  # a port for some hosts only
        "host=a,b,c&port=1,2",  # three hosts, two ports
        "host=a:1&port=2",  # ports in both forms
        "host=a:x",  # not a number
        "host=a:70000",
        "host=,b",  # an empty host
        "host=a b",  # not a host name
    ],
)
def test_a_bad_host_list_is_refused_without_the_password(
    query: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql+psycopg://u:{SECRET}@/rota?{query}"
    with pytest.raises(BadDatabaseSetting) as raised:
        parse_url(url)
    assert SECRET not in str(raised.value)
    assert main(["jobs", "--db", url]) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "Traceback" not in out + err


def test_the_engine_and_a_listen_connection_reach_the_live_host(
    pg_admin_url: str, dead_port: int
) -> None:
    """The first host refuses; both connections go on to the second, the writable one."""
    admin = make_url(pg_admin_url)
    assert admin.port is not None and admin.database is not None
    user = admin.username or "postgres"
    for url in _spellings(dead_port, admin.port, admin.database):
        url = url.replace(f"u:{SECRET}@", f"{user}@")
        engine = make_engine(url)
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT inet_server_port()")).scalar() == admin.port
            # What the executor's listener and the scheduler's wake-up connection do:
            dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                row = conn.execute("SELECT inet_server_port()").fetchone()
                assert row is not None and row[0] == admin.port
        finally:
            engine.dispose()
