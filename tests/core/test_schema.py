"""A schema of its own: two rota installations in one PostgreSQL database.

``--schema NAME`` / ``ROTA_SCHEMA`` puts every table, index, sequence, the
trigger function and Alembic's version table in that schema, and the NOTIFY
channels carry its name: jobs of one installation are never claimed, listed
or woken in the other. Without the option nothing changes. SQLite refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import ProgrammingError

import rota
from rota.cli.main import main
from rota.core.database import BadDatabaseSetting, listen_channel, make_engine
from rota.core.queries.jobs_notify import CHANNEL
from rota.executor.service import Executor
from rota.migrations.runner import upgrade
from tests.support.executor_support import claim_as, job_type, store_types

FILE = """\
job_types:
  t:
    handler: tests.handlers.plain:noop
schedules: {}
"""


@pytest.fixture
def two_schemas(empty_pg_url: str, tmp_path: Path) -> Iterator[tuple[str, Engine, Engine]]:
    """An empty database, migrated twice: into schema ``a`` and schema ``b``."""
    schedule = tmp_path / "s.yaml"
    schedule.write_text(FILE)
    for schema in ("a", "b"):
        assert main(["migrate", "--db", empty_pg_url, "--schema", schema]) == 0
        assert main(["apply", str(schedule), "--db", empty_pg_url, "--schema", schema]) == 0
    a = make_engine(empty_pg_url, schema="a")
    b = make_engine(empty_pg_url, schema="b")
    yield empty_pg_url, a, b
    a.dispose()
    b.dispose()


def _tables(url: str, schema: str) -> set[str]:
    plain = make_engine(url)
    try:
        with plain.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = :s AND c.relkind IN ('r', 'S', 'i')"
                    " UNION ALL SELECT p.proname FROM pg_proc p"
                    " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = :s"
                ),
                {"s": schema},
            ).scalars()
            return set(rows)
    finally:
        plain.dispose()


def test_every_object_lives_in_its_schema_and_migrate_is_idempotent(
    two_schemas: tuple[str, Engine, Engine], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, _ = two_schemas
    for schema in ("a", "b"):
        objects = _tables(url, schema)
        assert {"jobs", "job_attempts", "schedules", "job_types", "schedule_skips"} <= objects
        assert {"alembic_version", "rota_notify_jobs", "ux_jobs_dedup"} <= objects
        assert "job_attempts_attempt_id_seq" in objects
    assert "jobs" not in _tables(url, "public")
    capsys.readouterr()
    assert main(["migrate", "--db", url, "--schema", "a"]) == 0
    assert "already at" in capsys.readouterr().out


def test_jobs_of_one_schema_are_never_listed_or_claimed_in_the_other(
    two_schemas: tuple[str, Engine, Engine], capsys: pytest.CaptureFixture[str]
) -> None:
    url, a, b = two_schemas
    capsys.readouterr()
    assert main(["enqueue", "t", "--db", url, "--schema", "a"]) == 0
    job_id = capsys.readouterr().out.strip().split()[-1]
    assert main(["jobs", "--json", "--db", url, "--schema", "b"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["jobs", "--json", "--db", url, "--schema", "a"]) == 0
    assert [j["job_id"] for j in json.loads(capsys.readouterr().out)] == [job_id]
    assert claim_as(b, "w:1:b", 10) == []
    (claimed,) = claim_as(a, "w:1:a", 10)
    assert str(claimed.job_id) == job_id


def test_the_environment_variable_names_the_schema(
    two_schemas: tuple[str, Engine, Engine],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, a, _ = two_schemas
    monkeypatch.setenv("ROTA_SCHEMA", "a")
    capsys.readouterr()
    assert main(["enqueue", "t", "--db", url]) == 0
    job_id = capsys.readouterr().out.strip().split()[-1]
    (claimed,) = claim_as(a, "w:1:a", 10)
    assert str(claimed.job_id) == job_id


def test_an_application_connection_enqueues_into_rotas_schema(
    two_schemas: tuple[str, Engine, Engine],
) -> None:
    url, a, b = two_schemas
    app = make_engine(url)  # the application's own engine: its search_path knows no rota
    try:
        with app.begin() as conn:
            one = rota.enqueue(conn, "t", dedup_key="order-1", schema="b")
            again = rota.enqueue(conn, "t", dedup_key="order-1", schema="b")
            many = rota.enqueue_many(conn, [rota.JobRequest("t")] * 3, schema="b")
            # Big enough to go in pipelined INSERTs; a bad last value takes them back.
            big = rota.enqueue_many(conn, [rota.JobRequest("t")] * 450, schema="b")
            bad = [rota.JobRequest("t")] * 449 + [rota.JobRequest("t", priority=10**9)]
            with pytest.raises(ValueError, match="request 449: priority"):
                rota.enqueue_many(conn, bad, schema="b")
        with pytest.raises(ProgrammingError, match="does not exist"), app.begin() as conn:
            rota.enqueue(conn, "t")  # without the schema: public holds no rota tables
    except Exception:
        app.dispose()
        raise
    app.dispose()
    assert one.created and not again.created and again.job_id == one.job_id
    assert len({m.job_id for m in many}) == 3
    assert len({m.job_id for m in big}) == 450
    assert claim_as(a, "w:1:a", 10) == []
    assert len(claim_as(b, "w:1:b", 1000)) == 4 + 450


def _notifications(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    return [n.channel for n in conn.notifies(timeout=5, stop_after=1)]


def test_wakeups_stay_in_their_schema(two_schemas: tuple[str, Engine, Engine]) -> None:
    _, a, b = two_schemas
    dsns = {
        name: engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        for name, engine in (("a", a), ("b", b))
    }
    with (
        psycopg.connect(dsns["a"], autocommit=True) as listen_a,
        psycopg.connect(dsns["b"], autocommit=True) as listen_b,
    ):
        listen_a.execute(f"LISTEN {listen_channel(listen_a, CHANNEL)}")
        listen_b.execute(f"LISTEN {listen_channel(listen_b, CHANNEL)}")
        with a.begin() as conn:
            rota.enqueue(conn, "t")
        assert _notifications(listen_a) == ["rota_jobs_a"]
        with b.begin() as conn:
            rota.enqueue(conn, "t")
        # Notifications arrive in commit order: had b's listener been woken by a's
        # insert, that notification would come before the one for b's own insert.
        assert _notifications(listen_b) == ["rota_jobs_b"]
        assert list(listen_b.notifies(timeout=0.2, stop_after=1)) == []


def test_an_executor_in_one_schema_runs_only_its_jobs(
    two_schemas: tuple[str, Engine, Engine],
) -> None:
    _, a, b = two_schemas
    spec = job_type("t")
    store_types(b, spec)
    with a.begin() as conn:
        rota.enqueue(conn, "t")
    executor = Executor(b, listen=False)
    executor.start()
    try:
        assert executor.claim_once() == 0
    finally:
        executor.shutdown(drain_timeout=0)
    with a.connect() as conn:
        assert conn.execute(text("SELECT state FROM jobs")).scalar_one() == "QUEUED"


def test_without_a_schema_the_public_schema_is_used_as_before(empty_pg_url: str) -> None:
    engine = make_engine(empty_pg_url)
    try:
        upgrade(engine, "0003")  # an existing database, before schemas existed
        upgrade(engine)  # upgrades in place
        assert "jobs" in _tables(empty_pg_url, "public")
        dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as listen:
            assert listen_channel(listen, CHANNEL) == "rota_jobs"
            listen.execute("LISTEN rota_jobs")
            store_types(engine, job_type("t"))
            with engine.begin() as conn:
                rota.enqueue(conn, "t")
            assert _notifications(listen) == ["rota_jobs"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("schema", ["Bad-Name", "x" * 49, "1abc", "a;drop"])
def test_a_bad_schema_name_is_refused(
    empty_pg_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--db", empty_pg_url, "--schema", schema]) == 2
    assert "lower-case letters" in capsys.readouterr().err


def test_sqlite_refuses_a_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["migrate", "--db", url, "--schema", "x"]) == 2
    assert "SQLite has no schemas" in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()


HOSTILE_SCHEMAS = [
    # would close the quoted name and run a query of its own (a sleep, a fake job type)
    'b".job_types WHERE (SELECT pg_sleep(1)::text) IS NULL UNION ALL SELECT NULL::json FROM "b',
    "b\n",  # `$` of a regular expression matches before a final newline
    "B",
]


@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS, ids=["injection", "newline", "upper"])
def test_a_producers_schema_name_never_enters_sql_unchecked(
    two_schemas: tuple[str, Engine, Engine], schema: str
) -> None:
    url, _a, b = two_schemas
    app = make_engine(url)
    try:
        with app.begin() as conn:
            with pytest.raises(BadDatabaseSetting, match="lower-case letters"):
                rota.enqueue(conn, "t", schema=schema)
            with pytest.raises(BadDatabaseSetting, match="lower-case letters"):
                rota.enqueue_many(conn, [rota.JobRequest("t", dedup_key="k")], schema=schema)
    finally:
        app.dispose()
    assert claim_as(b, "w:1:b", 10) == []
