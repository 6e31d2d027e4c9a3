"""A database that refuses this role for good, mid-run, ends the process (exit 1).

An operator revokes the role's CONNECT privilege (or pg_hba.conf starts refusing it)
while an executor runs: every new connection then fails with libpq's "FATAL:
permission denied for database", which no retry can fix. It must be the one
``database_unusable`` line and exit 1, as a refused password is, not a silent
"outage" that lasts forever.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from tests.support.executor_support import REPO_ROOT, subprocess_env, wait_for
from tests.support.pg_roles import login_role

pytestmark = pytest.mark.slow

GUARD_SECONDS = 30.0


@pytest.fixture
def role_url(fresh_pg_url: str) -> Iterator[tuple[str, str]]:
    """(URL of a login role of its own with rota's privileges, its database name)."""
    connect_only = [
        'GRANT CONNECT ON DATABASE "{database}" TO "{role}"',
        'REVOKE CONNECT ON DATABASE "{database}" FROM PUBLIC',
    ]
    with login_role(fresh_pg_url, "rota_r", connect_only) as url:
        yield url, str(make_url(fresh_pg_url).database)


def test_connect_privilege_revoked_mid_run_exits_1(
    fresh_pg_url: str, role_url: tuple[str, str], tmp_path: Path
) -> None:
    url, database = role_url
    log = tmp_path / "executor.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rota.cli.main",
                "executor",
                "--log-level",
                "INFO",
                "--poll-interval",
                "0.2",
                "--db",
                url,
            ],
            cwd=REPO_ROOT,
            env=subprocess_env(url),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: "event=executor_started" in log.read_text() or proc.poll() is not None,
            timeout=30,
            what="the executor to start",
        )
        assert proc.poll() is None, log.read_text()
        role = make_url(url).username
        admin = create_engine(fresh_pg_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'REVOKE CONNECT ON DATABASE "{database}" FROM "{role}"')
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
        admin.dispose()
        revoked = time.monotonic()
        while proc.poll() is None and time.monotonic() - revoked < GUARD_SECONDS:
            time.sleep(0.2)
        text = log.read_text()
        assert proc.poll() == 1, text
        unusable = [ln for ln in text.splitlines() if "event=database_unusable" in ln]
        assert len(unusable) == 1 and "permission" in unusable[0], text
        assert "Traceback" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
