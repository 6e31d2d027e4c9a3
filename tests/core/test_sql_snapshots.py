"""Every hot statement, readable whole: rendered snapshots under ``tests/core/sql/``.

The hot statements are assembled from fragments (the lease fence, the state
sets, the clock). Each is rendered here exactly as the database receives it
and compared with its snapshot, so a reader can see the whole statement, and
a change to a shared fragment shows up as a reviewed diff of every statement
it reaches. After an intended change: ``ROTA_UPDATE_SQL=1 pytest
tests/core/test_sql_snapshots.py`` rewrites the snapshots; review the diff.
"""

from __future__ import annotations

import os
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import ClauseElement, TextClause
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import SAWarning

from rota.core.queries import (
    attempt_output,
    jobs_claim,
    jobs_insert,
    jobs_lease,
    jobs_outcome,
    schedule_outcomes,
)
from rota.core.queries import schedules as schedule_queries

SQL_DIR = Path(__file__).resolve().parent / "sql"
HEADER = "-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).\n"


def _render(*parts: str | ClauseElement) -> str:
    out = []
    for part in parts:
        if isinstance(part, TextClause):
            sql = part.text
        elif isinstance(part, ClauseElement):
            with warnings.catch_warnings():  # job_id has no default: producers always pass it
                warnings.simplefilter("ignore", SAWarning)
                sql = str(part.compile(dialect=sqlite.dialect()))
        else:
            sql = part
        lines = [line.rstrip() for line in textwrap.dedent(sql).strip("\n").splitlines()]
        out.append("\n".join(lines).strip() + ";")
    return HEADER + "\n\n".join(out) + "\n"


# name -> the statements of that path, in the order one call sends them
STATEMENTS: dict[str, Callable[[], str]] = {
    # The function as `rota migrate` installs it, then the call an executor sends.
    "claim_unkeyed.postgresql": lambda: _render(
        jobs_claim.CLAIM_UNKEYED.ddl, jobs_claim.CLAIM_UNKEYED.call
    ),
    "claim_limited_two_pools.sqlite": lambda: _render(jobs_claim._sqlite_claim(2)),
    "claim_limited.postgresql": lambda: _render(jobs_claim._PG_LOCK, jobs_claim._pg_claim(1)),
    "claim_limited.sqlite": lambda: _render(
        jobs_claim._sqlite_claim(1), jobs_claim._SQLITE_OPEN_ATTEMPTS
    ),
    "finish.postgresql": lambda: _render(jobs_outcome.FINISH.ddl, jobs_outcome.FINISH.call),
    "finish_successes.postgresql": lambda: _render(
        jobs_outcome.SUCCEED.ddl, jobs_outcome.SUCCEED.call
    ),
    "finish.sqlite": lambda: _render(
        jobs_outcome._sqlite_finish(),
        jobs_outcome._SQLITE_CLOSE_ATTEMPTS,
        attempt_output.SQLITE_KEEP_OUTPUT,
        schedule_outcomes._by_id(pg=False),
    ),
    "renew.postgresql": lambda: _render(jobs_lease._pg_renew()),
    "renew.sqlite": lambda: _render(jobs_lease._sqlite_renew(), attempt_output.SQLITE_KEEP_OUTPUT),
    "sweep.postgresql": lambda: _render(jobs_lease._pg_sweep()),
    "sweep.sqlite": lambda: _render(
        jobs_lease._sqlite_sweep(),
        jobs_lease._SQLITE_CLOSE_EXPIRED,
        schedule_outcomes._by_id(pg=False),
    ),
    "insert_jobs.postgresql": lambda: _render(jobs_insert._pg_insert(None)),
    "insert_jobs.sqlite": lambda: _render(jobs_insert._SQLITE_INSERT),
    "advance_cursors.postgresql": lambda: _render(schedule_queries._PG_ADVANCE),
}


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_statement_matches_its_snapshot(name: str) -> None:
    rendered = STATEMENTS[name]()
    path = SQL_DIR / f"{name}.sql"
    if os.environ.get("ROTA_UPDATE_SQL"):
        SQL_DIR.mkdir(exist_ok=True)
        path.write_text(rendered)
    assert path.exists(), f"no snapshot {path}: run with ROTA_UPDATE_SQL=1 and review it"
    assert rendered == path.read_text(), (
        f"{name} changed: review it, then ROTA_UPDATE_SQL=1 pytest {Path(__file__).name}"
    )


def test_no_stale_snapshots() -> None:
    names = {p.name.removesuffix(".sql") for p in SQL_DIR.glob("*.sql")}
    assert names == set(STATEMENTS)
