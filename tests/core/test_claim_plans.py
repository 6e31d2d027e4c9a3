"""The claim reaches the rows it takes through the primary key, whatever the statistics say.

The situation of production after months: a table of finished jobs, analysed
while the queue was empty, then a burst of jobs that autovacuum has not yet
re-analysed (it waits for 10% of the table to change). The planner then
believes the partial index of claimable rows holds one row. A claim whose
UPDATE could use that index joined its picked rows against a scan of the whole
queue, once per claim (200 ms instead of 6 ms at 20,000 queued beside a
million finished jobs). The plan is asserted, not the time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.queries import jobs_claim
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.server_functions import ServerFunction
from rota.producer.enqueue import JobRequest, enqueue_many
from tests.support.db_support import migrated_sqlite_url

FINISHED = 5_000
QUEUED = 3_000

_FINISHED_ROWS = """
    INSERT INTO jobs (job_id, job_type, pool, state, attempt_count, max_attempts, run_after,
                      lease_generation, lease_seconds, idempotent, needs_reconcile,
                      finished_at, created_at, updated_at)
    SELECT gen_random_uuid(), 'old', 'default', 'SUCCEEDED', 1, 5, now(), 1, 60, true, false,
           now(), now(), now()
    FROM generate_series(1, :n)
"""


@pytest.fixture
def aged_engine(fresh_pg_url: str) -> Any:
    engine = make_engine(fresh_pg_url)
    with engine.begin() as conn:
        upsert_job_types(
            conn, [JobTypeSpec(name="old", handler="m:f"), JobTypeSpec(name="burst", handler="m:f")]
        )
        conn.execute(text(_FINISHED_ROWS), {"n": FINISHED})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ANALYZE jobs"))  # statistics of an empty queue
    with engine.begin() as conn:
        enqueue_many(conn, [JobRequest("burst", args={"i": i}) for i in range(QUEUED)])
    yield engine
    engine.dispose()


def _explain(engine: Engine, statement: Any, params: dict[str, Any], prelude: bool) -> str:
    with engine.connect() as conn:  # rolled back on close: EXPLAIN ANALYZE ran the claim
        if prelude:
            conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": jobs_claim.CLAIM_LOCK_KEY}
            )
        rows = conn.execute(text("EXPLAIN (ANALYZE, COSTS OFF) " + statement.text), params)
        return "\n".join(r[0] for r in rows)


def _explain_function(engine: Engine, function: ServerFunction, params: dict[str, Any]) -> str:
    """The plan of ``function``'s statement as the function runs it after its first
    calls: a generic plan, made once for any arguments (PL/pgSQL's plan cache), forced
    here so it is the one shown."""
    names = [name for name, _ in function.params]
    body = re.sub(
        r"(?<![:\w]):([A-Za-z_]\w*)",
        lambda m: f"${names.index(m.group(1)) + 1}",
        function.statement.text,
    )
    types = ", ".join(sql_type for _, sql_type in function.params)
    args = ", ".join(f"CAST(%({n})s AS {t})" for n, t in function.params)
    with engine.connect() as conn:  # rolled back on close: EXPLAIN ANALYZE ran the claim
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql(f"PREPARE claim ({types}) AS {body}")
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, psycopg.Connection)
        # EXECUTE's arguments as literals: a utility statement takes no bound parameters.
        explain = psycopg.ClientCursor(raw).mogrify(
            f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE claim({args})",
            {n: params.get(n) for n in names},
        )
        plan = "\n".join(r[0] for r in conn.exec_driver_sql(explain))
        conn.exec_driver_sql("DEALLOCATE claim")
        return plan


def _unkeyed_params(pools: list[str], limit: int, start: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "owner": "w",
        "pools": pools,
        "limit": limit,
        "now": None,
        "excluded_types": [],
        "head_below": jobs_claim.HEAD_BELOW_ALL if start is None else start[0],
    }
    if start is not None:
        params.update(start_priority=start[0], start_run_after=start[1], start_created_at=start[2])
    return params


def _explain_unkeyed(engine: Engine, params: dict[str, Any], plan: str) -> str:
    """The lock-free claim's plan: ``custom`` (for these values), or ``generic`` (the
    plan the function keeps)."""
    if plan == "generic":
        return _explain_function(engine, jobs_claim.CLAIM_UNKEYED, params)
    full = {n: params.get(n) for n, _ in jobs_claim.CLAIM_UNKEYED.params}
    return _explain(engine, jobs_claim.CLAIM_UNKEYED.statement, full, prelude=False)


def _update_scan(plan: str) -> str:
    """The line saying how the UPDATE's own rows (alias j) are found."""
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if "Update on jobs j" in line)
    for line in lines[start:]:
        if re.search(r"Scan .* on jobs j\b", line):
            return line.strip()
    raise AssertionError(f"no scan of jobs j under the UPDATE:\n{plan}")


@pytest.mark.parametrize("kind", ["unkeyed", "unkeyed-generic", "limited"])
def test_the_claim_update_goes_through_the_primary_key(aged_engine: Engine, kind: str) -> None:
    if kind.startswith("unkeyed"):
        plan_kind = "generic" if kind.endswith("generic") else "custom"
        plan = _explain_unkeyed(aged_engine, _unkeyed_params(["default"], 48), plan_kind)
    else:
        with aged_engine.connect() as conn:
            params = jobs_claim._params(conn, "w", ["default"], 48, None, None, None)
        plan = _explain(aged_engine, jobs_claim._pg_claim(1), params, prelude=True)
    assert "pk_jobs" in _update_scan(plan), plan
    # and it claimed a full batch (the plan ran for real inside the rolled-back transaction)
    assert re.search(r"Update on jobs j .*rows=48 ", plan), plan


def test_the_burst_was_not_analysed(aged_engine: Engine) -> None:
    """The fixture's premise: the planner still believes the queue is (nearly) empty."""
    with aged_engine.connect() as conn:
        tuples = conn.execute(
            text("SELECT reltuples FROM pg_class WHERE relname = 'jobs'")
        ).scalar_one()
    assert tuples <= FINISHED


@pytest.mark.parametrize("plan_kind", ["custom", "generic"])
@pytest.mark.parametrize("from_start", [False, True])
@pytest.mark.parametrize("n_pools", [1, 2])
def test_the_claim_reads_each_pool_in_index_order(
    aged_engine: Engine, n_pools: int, from_start: bool, plan_kind: str
) -> None:
    """Each pool through the claimable index, in claim order, never a sort of the whole queue
    (``c.pool IN (a, b)`` read every claimable job of both and sorted them); with a start,
    each of its two ranges is where a B-tree scan begins (an index condition, not a filter
    over every dead entry before it), in the plan made for the values and in the generic
    plan the function keeps. The claim takes its full batch."""
    with aged_engine.connect() as conn:
        first = conn.execute(
            text(
                "SELECT priority, run_after, created_at FROM jobs WHERE state = 'QUEUED' "
                "ORDER BY priority, run_after, created_at LIMIT 1"
            )
        ).one()
    params = _unkeyed_params(["default", "other"][:n_pools], 48, first if from_start else None)
    plan = _explain_unkeyed(aged_engine, params, plan_kind)
    lines = plan.splitlines()
    scans = [i for i, line in enumerate(lines) if re.search(r"Scan .* on jobs c(_\d+)?\b", line)]
    # two ranges, each scanned once per pool: a lower priority number, and from the start on
    assert len(scans) == 2, plan
    for at in scans:
        assert re.search(r"Index Scan using ix_jobs_claimable on jobs c", lines[at]), plan
        cond = lines[at + 1]
        assert "Index Cond" in cond and re.search(r"pool\)::text = p(_\d+)?\.pool\b", cond), plan
        assert "ROW(priority, run_after, created_at) >=" in cond or "(priority < " in cond, plan
        # once per pool (a lateral scan), never a read of the whole queue
        assert re.search(rf"loops={n_pools}\)", lines[at]), plan
    assert re.search(r"Update on jobs j .*rows=48 ", plan), plan


def test_the_limited_claim_reads_each_pool_in_index_order(aged_engine: Engine) -> None:
    with aged_engine.connect() as conn:
        params = jobs_claim._params(conn, "w", ["default", "other"], 48, None, None, None)
    plan = _explain(aged_engine, jobs_claim._pg_claim(2), params, prelude=True)
    scans = [line for line in plan.splitlines() if re.search(r"Scan .* on jobs c(_\d+)?\b", line)]
    assert len(scans) == 2, plan
    assert all("Index Scan using ix_jobs_claimable on jobs c" in line for line in scans), plan
    assert re.search(r"Update on jobs j .*rows=48 ", plan), plan


def test_the_sqlite_claim_reads_each_pool_in_index_order(tmp_path: Path) -> None:
    """SQLite: each pool searched on its own (``pool=?``), not ``ANY(pool)`` then sorted."""
    engine = make_engine(migrated_sqlite_url(tmp_path / "rota.db"))
    try:
        with engine.connect() as conn:
            params = jobs_claim._params(conn, "w", ["default", "other"], 8, None, None, None)
            rows = conn.execute(
                text("EXPLAIN QUERY PLAN " + jobs_claim._sqlite_claim(2).text), params
            ).all()
    finally:
        engine.dispose()
    searches = [r[3] for r in rows if "ix_jobs_claimable " in r[3] + " "]
    assert len(searches) == 2 and all("(pool=?" in s for s in searches), rows


@pytest.mark.parametrize("plan_kind", ["custom", "generic"])
@pytest.mark.parametrize("n_pools", [1, 2])
def test_an_idle_polls_question_reads_the_waiting_jobs_index_not_the_table(
    aged_engine: Engine, n_pools: int, plan_kind: str
) -> None:
    """``any_job_due`` (an idle executor's poll) is answered from a queue index, with
    the finished jobs never read, and stops at the first due job, in the plan made for
    the values and in the generic plan its function keeps."""
    pools = ["default", "other"][:n_pools]
    params: dict[str, Any] = {"now": None, "pools": pools}
    if plan_kind == "generic":
        plan = _explain_function(aged_engine, jobs_claim.ANY_DUE, params)
    else:
        plan = _explain(aged_engine, jobs_claim.ANY_DUE.statement, params, prelude=False)
    assert "Seq Scan" not in plan, plan
    assert re.search(r"Index (Only )?Scan using ix_jobs_(claimable|state) on jobs", plan), plan
    with aged_engine.connect() as conn:
        assert jobs_claim.any_job_due(conn, pools=pools)
        assert not jobs_claim.any_job_due(conn, pools=["elsewhere"])
