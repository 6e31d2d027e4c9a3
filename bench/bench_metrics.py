"""What a ``GET /metrics`` scrape and a backpressure check cost: printed, never asserted.

Fills a PostgreSQL database (and a SQLite file) with a job history of
``--finished`` finished jobs and ``--waiting`` waiting ones over 20 job types
in 4 pools, plus the metric rows of those job types, then times:

* the whole exposition (``rota.api.exposition.exposition``: every gauge query
  and the aggregate table), p50 and p95 over 20 scrapes;
* one backpressure check of a job type with ``max_queued`` and
  ``max_queue_age`` set (``rota.producer.backpressure.check_backpressure``).

The gauges read only partial indexes of unfinished and FAILED jobs: their cost
follows the number of waiting jobs, not the history.

Run: ``python -m bench.bench_metrics [--finished N] [--waiting N]``
(``ROTA_BENCH_PG_URL`` names the server, default
``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psycopg
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from rota.api.exposition import exposition
from rota.api.failed_counts import FailedCounts
from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.metric_deltas import EXECUTION, QUEUE_WAIT, Deltas, delta
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.metric_tables import add_metric_deltas
from rota.migrations.runner import upgrade
from rota.producer.backpressure import Submission, check_backpressure

TYPES = [f"type{i}" for i in range(20)]
_PG_SERIES = "generate_series(1, :n) AS g(i)"
_SQLITE_SERIES = (
    "(WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n) SELECT i FROM g)"
)


def fill(engine: Engine, finished: int, waiting: int) -> None:
    specs = [JobTypeSpec(name=t, handler="m:f", pool=f"pool{i % 4}") for i, t in enumerate(TYPES)]
    with engine.begin() as conn:
        upsert_job_types(conn, specs)
        deltas: Deltas = {}
        for t in TYPES:
            for v in (0.003, 0.02, 0.4, 3.0, 40.0):
                delta(QUEUE_WAIT, (t,), v, deltas)
                delta(EXECUTION, (t, "SUCCEEDED"), v, deltas)
        add_metric_deltas(conn, deltas)
    pg = engine.dialect.name == "postgresql"
    uid = "gen_random_uuid()" if pg else "lower(hex(randomblob(16)))"
    now = "now()" if pg else "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
    series = _PG_SERIES if pg else _SQLITE_SERIES
    for n, state in ((finished, "SUCCEEDED"), (waiting, "QUEUED")):
        finished_at = now if state == "SUCCEEDED" else "NULL"
        with engine.begin() as conn:
            conn.execute(
                text(f"""
                INSERT INTO jobs (job_id, job_type, pool, state, run_after, created_at,
                                  updated_at, finished_at, attempt_count)
                SELECT {uid}, 'type' || (i % 20), 'pool' || ((i % 20) % 4), '{state}',
                       {now}, {now}, {now}, {finished_at}, 0
                FROM {series}
                """),
                {"n": n},
            )
    if pg:
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(
                text("VACUUM ANALYZE jobs")
            )


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        took.append((time.perf_counter() - start) * 1000)
    took.sort()
    return statistics.median(took), took[int(0.95 * (len(took) - 1))]


def measure(name: str, engine: Engine, finished: int, waiting: int) -> None:
    upgrade(engine)
    fill(engine, finished, waiting)
    spec = JobTypeSpec(
        name="type3", handler="m:f", max_queued=waiting, max_queue_age=timedelta(hours=1)
    )
    p50, p95 = timed(lambda: exposition(engine, FailedCounts()), 20)  # each one counts

    def check() -> None:
        with engine.begin() as conn:
            check_backpressure(conn, spec, Submission(1, 0))

    c50, c95 = timed(check, 50)
    print(
        f"{name:10}  {finished:>9,} finished  {waiting:>7,} waiting  "
        f"scrape p50 {p50:7.1f} ms  p95 {p95:7.1f} ms   "
        f"backpressure check p50 {c50:5.2f} ms  p95 {c95:5.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=500_000)
    parser.add_argument("--waiting", type=int, default=10_000)
    args = parser.parse_args()
    admin = os.environ.get("ROTA_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    name = f"rota_bench_metrics_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin).set(drivername="postgresql+psycopg", database=name)
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        measure("postgresql", engine, args.finished, args.waiting)
    finally:
        engine.dispose()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            measure("sqlite", engine, args.finished, args.waiting)
        finally:
            engine.dispose()


if __name__ == "__main__":
    main()
