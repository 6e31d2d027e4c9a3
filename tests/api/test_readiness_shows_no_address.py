"""``/readyz`` answers without a token, so none of its bodies names where the database
is: an unreachable database is "database unreachable", whatever the reason, with no
host, port, path, user or database name (the server's log has the reason).
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, make_url, text

from rota.api.problems import PROBLEM_JSON
from rota.core.database import make_engine
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.db_support import sqlalchemy_url

TOKEN = "s3cret-token"


def free_port() -> int:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def readyz(engine: Engine, token: str | None = None) -> httpx.Response:
    with running_api(engine, token=token) as base:
        return loopback.get(f"{base}/readyz", timeout=30)


def unreachable_urls(tmp_path: Path, pg_admin_url: str) -> list[tuple[str, list[str]]]:
    """(URL, the parts of it no answer may show) for each way a database is unreachable."""
    port = free_port()
    server = make_url(sqlalchemy_url(pg_admin_url, "postgres"))
    host, pg_port = server.host or "127.0.0.1", str(server.port or 5432)
    not_a_database = tmp_path / "secret-dir" / "rota.db"
    not_a_database.parent.mkdir()
    not_a_database.write_bytes(b"this is no SQLite file" * 100)
    return [
        (
            f"postgresql+psycopg://rota:hunter2@127.0.0.1:{port}/rota",
            ["127.0.0.1", str(port), "hunter2", "5432"],
        ),
        (
            f"postgresql+psycopg://{server.username}@{host}:{pg_port}/no_such_database_xyz",
            [host, pg_port, "no_such_database_xyz"],
        ),
        (
            f"postgresql+psycopg://no_such_user_xyz@{host}:{pg_port}/postgres",
            [host, pg_port, "no_such_user_xyz"],
        ),
        (f"sqlite:///{not_a_database}", [str(tmp_path), "secret-dir"]),
    ]


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
def test_an_unreachable_database_is_said_without_its_address(
    tmp_path: Path, pg_admin_url: str, token: str | None
) -> None:
    for url, secret_parts in unreachable_urls(tmp_path, pg_admin_url):
        engine = make_engine(url)
        try:
            r = readyz(engine, token)
        finally:
            engine.dispose()
        assert r.status_code == 503, (url, r.text)
        assert r.headers["content-type"] == PROBLEM_JSON
        body = r.json()
        assert body["detail"] == "database unreachable", (url, body)
        for part in secret_parts:
            assert part not in r.text, (url, part, r.text)


def test_every_other_readyz_answer_names_no_address(engine: Engine, empty_db_url: str) -> None:
    from rota.migrations.check import VERSION_TABLE

    parts = [engine.url.host or "", str(engine.url.port or ""), engine.url.database or ""]
    secrets = [p for p in parts if p]
    ready = readyz(engine)
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}

    empty = make_engine(empty_db_url)
    try:
        unmigrated = readyz(empty)
        assert unmigrated.status_code == 503
        assert "rota migrate" in unmigrated.json()["detail"]
        with empty.begin() as conn:  # another application's Alembic history
            conn.execute(text(f"CREATE TABLE {VERSION_TABLE} (version_num VARCHAR(32))"))
            conn.execute(text(f"INSERT INTO {VERSION_TABLE} VALUES ('abc123')"))
        foreign = readyz(empty)
        assert foreign.status_code == 503 and "no rota release" in foreign.json()["detail"]
        with empty.begin() as conn:
            conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
        newer = readyz(empty)
        assert newer.status_code == 503 and "newer than this rota" in newer.json()["detail"]
    finally:
        empty.dispose()
    for r in (ready, unmigrated, foreign, newer):
        for part in secrets:
            assert part not in r.text, (part, r.text)
