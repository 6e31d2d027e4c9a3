"""The migrations are the only way tables are made: they match the models and round-trip."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from rota.core.database import SchemaNotReady, make_engine
from rota.core.queries import jobs_claim
from rota.core.queries.server_functions import ServerFunction, missing
from rota.core.tables import metadata
from rota.migrations.check import HEAD, SERVER_FUNCTIONS
from rota.migrations.runner import (
    alembic_config,
    current_revision,
    downgrade,
    ensure_migrated,
    head_revision,
    upgrade,
)


def _drift(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(ctx, metadata))
    finally:
        engine.dispose()


def test_upgrade_matches_models_and_round_trips(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        assert _drift(empty_db_url) == []
        assert current_revision(engine) == head_revision()
        downgrade(engine, "base")
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert tables <= {"alembic_version"}
        upgrade(engine)
        assert _drift(empty_db_url) == []
        upgrade(engine)  # idempotent
        ensure_migrated(engine)
    finally:
        engine.dispose()


def _storage_options(engine: Engine) -> dict[str, list[str] | None]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT relname, reloptions FROM pg_class"
                " WHERE relname IN ('jobs', 'job_attempts') AND relkind = 'r'"
            )
        ).all()
    return {name: options for name, options in rows}


def test_postgresql_storage_options_match_the_models_and_round_trip(empty_pg_url: str) -> None:
    # Alembic's comparison does not look at storage parameters (postgresql_with):
    # the models and migration 0011 are held together here instead.
    declared = {
        name: [f"{k}={v}" for k, v in (table.dialect_options["postgresql"]["with"] or {}).items()]
        or None
        for name, table in metadata.tables.items()
        if name in ("jobs", "job_attempts")
    }
    assert declared == {"jobs": None, "job_attempts": ["fillfactor=50"]}
    engine = make_engine(empty_pg_url)
    try:
        upgrade(engine)
        assert _storage_options(engine) == declared
        downgrade(engine, "0010")
        assert _storage_options(engine) == {"jobs": None, "job_attempts": None}
        upgrade(engine)
        assert _storage_options(engine) == declared
    finally:
        engine.dispose()


def test_unmigrated_database_is_refused_with_a_hint(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        with pytest.raises(SchemaNotReady, match="rota migrate"):
            ensure_migrated(engine)
    finally:
        engine.dispose()


def _refusal_at(engine: Engine, revision: str) -> str:
    """What the schema check says of a migrated database whose alembic_version says
    ``revision``."""
    upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})
    with pytest.raises(SchemaNotReady) as err:
        ensure_migrated(engine)
    return str(err.value)


def test_a_database_newer_than_this_rota_says_upgrade_rota_not_migrate(
    empty_db_url: str,
) -> None:
    # A rota older than the database (a replica not yet upgraded, restarted after a
    # newer one migrated) cannot migrate it: `rota migrate` is the wrong advice.
    engine = make_engine(empty_db_url)
    try:
        newer = f"{int(HEAD) + 1:04d}"
        message = _refusal_at(engine, newer)
        assert f"at schema {newer}, newer than this rota ({HEAD})" in message, message
        assert "rota migrate" not in message and "upgrade rota" in message, message
    finally:
        engine.dispose()


@pytest.mark.parametrize("foreign", ["ae1027a6acf", "0011a", "0000"])
def test_a_revision_no_rota_made_is_named_not_sent_to_migrate(
    empty_db_url: str, foreign: str
) -> None:
    # An application's own Alembic history in the same schema shares the
    # alembic_version table; `rota migrate` cannot find its revision either.
    engine = make_engine(empty_db_url)
    try:
        message = _refusal_at(engine, foreign)
        assert f"at revision {foreign!r}, which no rota release made" in message, message
        assert "rota migrate" not in message and "--schema" in message, message
    finally:
        engine.dispose()


def test_migrate_refuses_a_revision_it_cannot_upgrade_from_and_says_why(
    empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from rota.cli.main import main

    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'ae1027a6acf'"))
        assert main(["migrate", "--db", empty_db_url]) == 2
        err = capsys.readouterr().err
        assert "'ae1027a6acf', which no rota release made" in err, err
        assert "Traceback" not in err
        # Two rows (another history with branches shares the table): refused alike,
        # whichever row a server returns first.
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": HEAD})
            conn.execute(text("INSERT INTO alembic_version VALUES ('ae1027a6acf')"))
        with pytest.raises(SchemaNotReady, match="which no rota release made"):
            ensure_migrated(engine)
        assert main(["migrate", "--db", empty_db_url]) == 2
        newer = f"{int(HEAD) + 1:04d}"
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM alembic_version"))
            conn.execute(text("INSERT INTO alembic_version VALUES (:v)"), {"v": newer})
        assert main(["migrate", "--db", empty_db_url]) == 2
        assert "upgrade rota" in capsys.readouterr().err
    finally:
        engine.dispose()


def test_the_check_knows_the_newest_migration() -> None:
    # rota.migrations.check compares databases with HEAD, without Alembic: a new
    # migration in versions/ must move HEAD too.
    assert head_revision() == HEAD
    # ... and numbers them as the check reads a rota revision: 0001, 0002, ...
    script = ScriptDirectory.from_config(alembic_config())
    revisions = sorted(r.revision for r in script.walk_revisions())
    assert revisions == [f"{n:04d}" for n in range(1, int(HEAD) + 1)]


def test_commands_and_the_executor_start_without_alembic(db_url: str) -> None:
    # Importing Alembic (and its Mako templates) took a fifth of a second of every
    # start, the ORM (enqueue takes a Session too) a twentieth.
    probe = (
        "import sys\n"
        "from rota.cli.main import main\n"
        "import rota.cli.commands.executor, rota.executor.service\n"
        f"assert main(['jobs', '--db', {db_url!r}]) == 0\n"
        "heavy = ('alembic', 'mako', 'sqlalchemy.orm')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _with_a_schedule(engine: Engine) -> None:
    from sqlalchemy import func, insert

    from rota.core.tables import schedules

    with engine.begin() as conn:
        conn.execute(
            insert(schedules).values(
                name="s",
                job_type="t",
                definition={},
                definition_hash="h",
                created_at=func.now(),
                updated_at=func.now(),
            )
        )


def _record(engine: Engine, action: str, **target: object) -> None:
    from sqlalchemy import func, insert

    from rota.core.tables import operator_actions

    with engine.begin() as conn:
        conn.execute(
            insert(operator_actions).values(action=action, actor="a", at=func.now(), **target)
        )


def test_the_migrated_operator_actions_checks_are_the_models(empty_db_url: str) -> None:
    # Alembic's comparison does not look at CHECK constraints: every action the
    # enum names must be storable in a migrated database, on exactly one target
    # (a job, a schedule, or a described set of jobs), and nothing else.
    from sqlalchemy.exc import IntegrityError

    from rota.core.operator_notes import OperatorAction

    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        _with_a_schedule(engine)
        for known in OperatorAction:
            _record(engine, known.value, schedule_name="s")
        _record(engine, "prune", job_filter="every finished job")
        bad: list[tuple[str, dict[str, object]]] = [
            ("delete", {"schedule_name": "s"}),
            ("pause", {}),
            ("pause", {"schedule_name": "s", "job_filter": "x"}),
        ]
        for action, target in bad:
            with pytest.raises(IntegrityError):
                _record(engine, action, **target)
    finally:
        engine.dispose()


def test_a_downgrade_drops_the_actions_the_older_schema_cannot_hold(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine)
        _with_a_schedule(engine)
        for action in ("pause", "resume", "trigger", "backfill"):
            _record(engine, action, schedule_name="s", detail="d")
        _record(engine, "prune", job_filter="every finished job")
        downgrade(engine, "0011")
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT action FROM operator_actions ORDER BY action_id"))
            assert [a for (a,) in kept] == ["pause", "resume"]
        upgrade(engine)
        assert _drift(empty_db_url) == []
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT action FROM operator_actions ORDER BY action_id"))
            assert [a for (a,) in kept] == ["pause", "resume"]
    finally:
        engine.dispose()


def test_the_migrated_late_reasons_are_the_models_and_a_downgrade_keeps_the_schedules(
    empty_db_url: str,
) -> None:
    # Every reason LateReason names is storable, nothing else is; one late row per
    # (schedule, instant). Going back below 0013 drops the table and the columns
    # and keeps every schedule and its ledger (SQLite does not rebuild the table).
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import func, insert, select
    from sqlalchemy.exc import IntegrityError

    from rota.core.states import LateReason
    from rota.core.tables import late_occurrences, schedule_skips

    engine = make_engine(empty_db_url)
    t0 = datetime(2026, 3, 2, tzinfo=UTC)

    def late(reason: str, minutes: int) -> None:
        with engine.begin() as conn:
            conn.execute(
                insert(late_occurrences).values(
                    schedule_name="s",
                    instant=t0 + timedelta(minutes=minutes),
                    deadline=t0 + timedelta(minutes=minutes, seconds=30),
                    reason=reason,
                    detected_at=func.now(),
                )
            )

    try:
        upgrade(engine)
        _with_a_schedule(engine)
        for i, reason in enumerate(LateReason):
            late(reason.value, i)
        for bad in ("skipped:paused", "late", "skipped:"):
            with pytest.raises(IntegrityError):
                late(bad, 100)
        with pytest.raises(IntegrityError):
            late("failed", 0)  # that occurrence is recorded already
        with engine.begin() as conn:
            conn.execute(
                insert(schedule_skips).values(
                    schedule_name="s",
                    reason="misfire",
                    first_instant=t0,
                    last_instant=t0,
                    count=1,
                    recorded_at=func.now(),
                )
            )
        downgrade(engine, "0012")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM schedules")).scalar_one() == 1
            assert conn.execute(select(func.count()).select_from(schedule_skips)).scalar_one() == 1
            assert not inspect(conn).has_table("late_occurrences")
        upgrade(engine)
        assert _drift(empty_db_url) == []
    finally:
        engine.dispose()


def test_dropping_the_attempts_foreign_key_keeps_every_attempt_and_its_output(
    empty_db_url: str,
) -> None:
    # 0018 copies job_attempts on SQLite to drop its foreign key. With foreign
    # keys enforced, dropping the old table deleted its rows first and cascaded
    # to job_attempt_output: every kept output would have gone. A downgrade
    # puts the foreign key back, dropping only attempts whose job is gone.
    engine = make_engine(empty_db_url)
    job = "'00000000-0000-0000-0000-000000000001'"
    orphan = "'00000000-0000-0000-0000-000000000002'"
    if engine.dialect.name == "sqlite":
        job, orphan = (i.replace("-", "") for i in (job, orphan))

    def count(table: str) -> int:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())

    try:
        upgrade(engine, "0017")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO jobs (job_id, job_type, pool, state, attempt_count, max_attempts,"
                    " run_after, lease_seconds, lease_generation, created_at, updated_at,"
                    " finished_at)"
                    f" VALUES ({job}, 't', 'default', 'SUCCEEDED', 1, 5, CURRENT_TIMESTAMP, 60,"
                    " 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id,"
                    f" started_at) VALUES ({job}, 1, 1, 'w', CURRENT_TIMESTAMP)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO job_attempt_output (job_id, lease_generation, output)"
                    f" VALUES ({job}, 1, 'kept')"
                )
            )
        upgrade(engine)
        assert (count("job_attempts"), count("job_attempt_output")) == (1, 1)
        assert _drift(empty_db_url) == []
        with engine.begin() as conn:  # an attempt whose job was deleted by hand
            conn.execute(
                text(
                    "INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id,"
                    f" started_at) VALUES ({orphan}, 1, 1, 'w', CURRENT_TIMESTAMP)"
                )
            )
        downgrade(engine, "0017")
        assert (count("job_attempts"), count("job_attempt_output")) == (1, 1)
        upgrade(engine)
        assert _drift(empty_db_url) == []
    finally:
        engine.dispose()


def test_migrate_installs_the_statements_functions_and_the_check_asks_for_them(
    fresh_pg_url: str,
) -> None:
    """PostgreSQL keeps the executor's hot statements as functions (plans cached behind
    a transaction pooler): `rota migrate` installs this release's, and a database at
    the newest revision without them is refused with the names and the command."""
    engine = make_engine(fresh_pg_url)
    try:
        with engine.connect() as conn:
            assert missing(conn, SERVER_FUNCTIONS) == []
        gone = jobs_claim.CLAIM_UNKEYED.name
        with engine.begin() as conn:
            conn.execute(text(f"DROP FUNCTION {gone}"))
        with pytest.raises(SchemaNotReady, match=rf"{gone}.*run `rota migrate`"):
            ensure_migrated(engine)

        def versions() -> dict[str, str]:  # a replaced function's row is a new version
            with engine.connect() as conn:
                rows = conn.execute(
                    text("SELECT proname, xmin::text FROM pg_proc WHERE proname LIKE 'rota_%'")
                )
                return {str(name): str(xmin) for name, xmin in rows}

        kept = versions()
        upgrade(engine)  # the revision is current: only the missing function is made
        ensure_migrated(engine)
        with engine.connect() as conn:
            assert missing(conn, SERVER_FUNCTIONS) == []
        after = versions()
        # The others left as they were: replacing one needs its owner's role, and
        # costs every server connection its cached plans.
        assert {n: v for n, v in after.items() if n != gone} == kept
        assert gone in after
    finally:
        engine.dispose()


def test_a_changed_statement_is_a_new_function_the_old_one_stays() -> None:
    """A release whose statement changed calls a function of another name, so executors
    of the release before keep theirs during a rolling upgrade."""
    claim = jobs_claim.CLAIM_UNKEYED
    changed = ServerFunction(
        claim.stem,
        text(claim.statement.text.replace("LIMIT :limit", "LIMIT :limit + 0")),
        claim.params,
        claim.returns,
    )
    assert changed.name != claim.name
    assert changed.name.startswith("rota_claim_unkeyed_")
    with pytest.raises(ValueError, match="not the declared ones"):
        ServerFunction(claim.stem, text("SELECT :other"), claim.params, claim.returns)


def test_a_downgrade_drops_this_release_s_functions_and_to_base_every_release_s(
    empty_pg_url: str,
) -> None:
    """Each function reads the schema of the release that made it: a downgrade leaves
    none of this release's behind, and a downgrade to nothing leaves no rota function
    at all (an older release's included). Another function of the schema stays."""
    engine = make_engine(empty_pg_url)
    older = "rota_claim_unkeyed_0123456789ab"  # as a release before this one named it

    def functions() -> set[str]:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT p.proname FROM pg_proc p JOIN pg_namespace n"
                    " ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
                )
            )
            return {str(name) for name in rows.scalars()}

    ours = {f.name for f in SERVER_FUNCTIONS}
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.execute(text(f"CREATE FUNCTION {older}() RETURNS int LANGUAGE sql AS 'SELECT 1'"))
            conn.execute(text("CREATE FUNCTION app_own() RETURNS int LANGUAGE sql AS 'SELECT 1'"))
        assert ours | {older, "app_own"} <= functions()
        previous = ScriptDirectory.from_config(alembic_config()).get_revision(HEAD).down_revision
        assert isinstance(previous, str)
        downgrade(engine, previous)
        assert not ours & functions()
        assert {older, "app_own"} <= functions()  # an older release's executors call it
        downgrade(engine, "base")
        assert not [name for name in functions() if name.startswith("rota_")]
        assert "app_own" in functions()
        upgrade(engine)
        ensure_migrated(engine)  # the functions are back with the schema
    finally:
        engine.dispose()
