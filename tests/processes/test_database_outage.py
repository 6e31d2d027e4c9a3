"""Database faults: a permanent one ends the process with one clear line, a transient one
is ridden out with one line per outage.

* an executor and a scheduler on a SQLite file that refuses writes (chmod 0444, opened
  ``mode=ro`` so that it refuses root too) exit 1 with one ``database_unusable`` line,
  without SQL text, instead of logging every statement every tick;
* an executor whose PostgreSQL server (a cluster of the test's own) is stopped hard and
  started again logs the outage once, without SQL text, and claims again afterwards;
* the classification itself, on real errors from both backends.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from rota.runtime.outage import Fault, classify, is_database_error
from tests.support.executor_support import REPO_ROOT, wait_for
from tests.support.pg_cluster import own_cluster

FILE = """\
job_types:
  ping:
    command: ["{python}", "-c", "pass"]
schedules:
  every-second:
    job_type: ping
    every: 1s
"""

GUARD_SECONDS = 90.0  # a hang guard, from the moment the process runs
SQL_TEXT = re.compile(r"\[SQL|INSERT INTO|UPDATE jobs|DELETE FROM|SELECT .* FROM")


def assert_no_sql_or_traceback(out: str) -> None:
    assert not SQL_TEXT.search(out) and "Traceback" not in out, out


def rota_cli(*argv: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *argv, "--db", url],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
    )


def read_only_sqlite(tmp_path: Path) -> str:
    """A migrated database with a schedule due and a job queued, then made read-only."""
    path = tmp_path / "rota.db"
    url = f"sqlite:///{path}"
    schedule = tmp_path / "s.yaml"
    schedule.write_text(FILE.format(python=sys.executable))
    assert rota_cli("migrate", url=url, cwd=tmp_path).returncode == 0
    assert rota_cli("apply", str(schedule), url=url, cwd=tmp_path).returncode == 0
    assert rota_cli("enqueue", "ping", url=url, cwd=tmp_path).returncode == 0
    for p in tmp_path.glob("rota.db*"):
        p.chmod(0o444)
    # As root, 0444 is no obstacle: opening the file read-only (an SQLite URI) is.
    return f"sqlite:///file:{path}?mode=ro&uri=true"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["executor", "scheduler"])
def test_read_only_sqlite_exits_1_with_one_clear_line(tmp_path: Path, command: str) -> None:
    url = read_only_sqlite(tmp_path)
    proc = rota_cli(command, "--log-level", "INFO", url=url, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    unusable = [ln for ln in out.splitlines() if "event=database_unusable" in ln]
    assert len(unusable) == 1, out
    assert "read-only" in unusable[0]
    assert_no_sql_or_traceback(out)
    problems = [ln for ln in out.splitlines() if " WARNING " in ln or " ERROR " in ln]
    assert problems == unusable, out  # nothing else complains, nothing repeats


@pytest.mark.slow
@pytest.mark.parametrize("command", ["executor", "scheduler"])
def test_postgresql_refusing_writes_exits_1_with_one_clear_line(
    fresh_pg_url: str, tmp_path: Path, command: str
) -> None:
    engine = create_engine(fresh_pg_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        name = conn.exec_driver_sql("SELECT current_database()").scalar_one()
        conn.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    engine.dispose()
    proc = rota_cli(command, "--log-level", "INFO", url=fresh_pg_url, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    unusable = [ln for ln in out.splitlines() if "event=database_unusable" in ln]
    assert len(unusable) == 1 and "refuses writes" in unusable[0], out
    assert_no_sql_or_traceback(out)


RIDERS = {
    "executor": ["executor", "--poll-interval", "0.2"],
    # A scheduler and an executor in one process: one outage, one line (not one per service).
    "run": ["run", "--no-serve"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(RIDERS))
def test_rota_rides_out_a_postgresql_restart(tmp_path: Path, command: str) -> None:
    with own_cluster() as cluster:
        url = cluster.url.replace("postgres@", "postgres:S3cretPassw0rd@")  # trust: ignored
        schedule = tmp_path / "s.yaml"
        schedule.write_text(FILE.format(python=sys.executable).split("schedules:")[0])
        assert rota_cli("migrate", url=url, cwd=tmp_path).returncode == 0
        assert rota_cli("apply", str(schedule), url=url, cwd=tmp_path).returncode == 0
        log_path = tmp_path / "executor.log"
        with open(log_path, "wb") as log:
            config = ["--config", str(schedule)] if command == "run" else []
            proc = subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", *RIDERS[command], *config, "--db", url],
                cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        engine = create_engine(cluster.url)
        try:
            wait_for(lambda: "event=executor_started" in log_path.read_text(), 30, "start")

            def enqueue_and_wait(label: str) -> None:
                done = rota_cli("enqueue", "ping", url=url, cwd=tmp_path)
                assert done.returncode == 0, done.stderr
                job_id = done.stdout.strip()

                def succeeded() -> bool:
                    with engine.connect() as conn:
                        state = conn.execute(
                            text("SELECT state FROM jobs WHERE job_id = :j"), {"j": job_id}
                        ).scalar_one()
                    return bool(state == "SUCCEEDED")

                wait_for(succeeded, 60, label)

            enqueue_and_wait("a job before the outage")
            engine.dispose()
            cluster.stop("immediate")
            wait_for(
                lambda: "event=database_unavailable" in log_path.read_text(),
                60,
                "the executor to notice the outage",
            )
            time.sleep(3)  # an outage of some seconds: the loops keep failing meanwhile
            cluster.start()
            enqueue_and_wait("a job after the restart")
            wait_for(lambda: "event=database_recovered" in log_path.read_text(), 30, "recovery")
            assert proc.poll() is None
        finally:
            engine.dispose()
            proc.terminate()
            proc.wait(30)
        out = log_path.read_text()
        assert out.count("event=database_unavailable") == 1, out
        assert out.count("event=database_recovered") == 1, out
        assert_no_sql_or_traceback(out)
        assert "S3cretPassw0rd" not in out
        problems = [ln for ln in out.splitlines() if " WARNING " in ln or " ERROR " in ln]
        assert len(problems) <= 2, out  # the outage line (and the registry's): no repeats


def test_classify_real_errors(tmp_path: Path, pg_admin_url: str) -> None:
    path = tmp_path / "x.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (a int)"))
    engine.dispose()
    ro = create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    with pytest.raises(DBAPIError) as refused, ro.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    assert classify(refused.value) is Fault.PERMANENT
    with pytest.raises(DBAPIError) as missing, ro.connect() as conn:
        conn.execute(text("SELECT * FROM jobs"))
    assert classify(missing.value) is Fault.PERMANENT
    ro.dispose()
    locker = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})
    with locker.connect() as holder, locker.connect() as waiter:
        holder.exec_driver_sql("BEGIN IMMEDIATE")
        with pytest.raises(DBAPIError) as locked:
            waiter.exec_driver_sql("BEGIN IMMEDIATE")
        holder.exec_driver_sql("ROLLBACK")
    locker.dispose()
    assert classify(locked.value) is Fault.TRANSIENT
    assert is_database_error(locked.value) and not is_database_error(ValueError("a bug"))
    down = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/x")
    with pytest.raises(DBAPIError) as refused_conn, down.connect():
        pass
    assert classify(refused_conn.value) is Fault.TRANSIENT
    nodb = create_engine(
        make_url(pg_admin_url)
        .set(drivername="postgresql+psycopg", database="rota_no_such_db_x")
        .render_as_string(hide_password=False)
    )
    with pytest.raises(DBAPIError) as no_db, nodb.connect():
        pass
    assert classify(no_db.value) is Fault.PERMANENT
