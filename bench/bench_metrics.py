"""What a ``GET /metrics`` scrape and a backpressure check cost: printed, never asserted.

Fills a PostgreSQL database (and a SQLite file) with a job history of
``--finished`` finished jobs (``--sqlite-finished`` on SQLite), half of them
scheduled, and ``--waiting`` waiting ones over 20 job types in 4 pools, plus
the metric rows of those job types, and ``--schedules`` schedules, each with
its outcome row (``schedule_outcomes``: the newest ended occurrence and the
newest success, as the statements that end jobs keep it), then times:

* the whole exposition (``rota.api.exposition.exposition``: every gauge query
  and the aggregate table), p50 and p95 over 20 scrapes;
* one backpressure check of a job type with ``max_queued`` and
  ``max_queue_age`` set (``rota.producer.backpressure.check_backpressure``).

The gauges read only partial indexes of unfinished and FAILED jobs: their cost
follows the number of waiting jobs, not the history. The per-schedule gauges
(five series per schedule) read one row of ``schedules`` and one of
``schedule_outcomes`` per schedule. The scrape's p95 is compared with a
ceiling of ``--ceiling-ms`` (1 s).

The history is inserted with one ``INSERT ... SELECT generate_series`` per
million rows (no per-row round trip), then ``VACUUM ANALYZE``.

The timings are wall time (p50, p95, and the fastest of the 20, the nearest to
an idle machine) and CPU time (p50): this process's (what ``rota serve``
spends) and, on a local PostgreSQL, the database server's (its backends'
time in ``/proc``), since a shared machine's load stretches wall time and
not CPU time. ``--keep NAME`` fills a PostgreSQL
database of that name once and keeps it: a later run with the same name
measures what it holds (10 million finished jobs take several minutes to
insert; drop it by hand when done).

Run: ``python -m bench.bench_metrics [--finished N] [--sqlite-finished N]
[--waiting N] [--schedules N] [--keep NAME] [--no-sqlite]``
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
from rota.core.metric_deltas import EXECUTION, QUEUE_WAIT, SCHEDULER_DELAY, Deltas, delta
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.metric_tables import add_metric_deltas
from rota.migrations.runner import upgrade
from rota.producer.backpressure import Submission, check_backpressure

TYPES = [f"type{i}" for i in range(20)]
_PG_SERIES = "generate_series(1, :n) AS g(i)"
_SQLITE_SERIES = (
    "(WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n) SELECT i FROM g)"
)


CHUNK = 1_000_000


def fill_delays(engine: Engine, n: int) -> None:
    """One observed scheduler delay for each of ``n`` schedules (``--delay-histograms``):
    one histogram for all of them since migration 0017 (it had a series per schedule)."""
    for start in range(1, n + 1, 5000):  # SQLite binds at most 32,766 values a statement
        deltas: Deltas = {}
        for i in range(start, min(n + 1, start + 5000)):
            delta(SCHEDULER_DELAY, (), 0.02 * (i % 50), deltas)
        with engine.begin() as conn:
            add_metric_deltas(conn, deltas)


def fill_schedules(engine: Engine, n: int) -> None:
    """``n`` schedules (every 60 s), a third paused, each with an outcome row."""
    pg = engine.dialect.name == "postgresql"
    series = _PG_SERIES if pg else _SQLITE_SERIES
    now = "now()" if pg else "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
    true = "TRUE" if pg else "1"
    definition = '{"job_type": "type0", "every": "60s"}'
    with engine.begin() as conn:
        conn.execute(
            text(f"""
            INSERT INTO schedules (name, job_type, paused, next_fire_at, definition,
                                   definition_hash, created_at, updated_at)
            SELECT 'schedule-' || i, 'type0', CASE WHEN i % 3 = 0 THEN {true} ELSE NOT {true} END,
                   {now}, :definition, 'h', {now}, {now}
            FROM {series}
            """),
            {"n": n, "definition": definition},
        )
        conn.execute(
            text(f"""
            INSERT INTO schedule_outcomes (schedule_name, last_state, last_instant,
                                           last_finished_at, last_success_instant)
            SELECT 'schedule-' || i, CASE WHEN i % 10 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
                   {now}, {now}, CASE WHEN i % 20 = 0 THEN NULL ELSE {now} END
            FROM {series}
            """),
            {"n": n},
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
    chunks = [min(CHUNK, finished - k) for k in range(0, finished, CHUNK)]
    started = time.perf_counter()
    for n in chunks:
        insert_jobs(engine, n, "SUCCEEDED")
    took = time.perf_counter() - started
    print(f"  {engine.dialect.name}: {finished:,} finished jobs inserted in {took:,.0f} s")
    fill_waiting(engine, waiting)


def insert_jobs(engine: Engine, n: int, state: str) -> None:
    """``n`` jobs in ``state`` in one INSERT ... SELECT (no row crosses the wire)."""
    pg = engine.dialect.name == "postgresql"
    uid = "gen_random_uuid()" if pg else "lower(hex(randomblob(16)))"
    now = "now()" if pg else "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
    series = _PG_SERIES if pg else _SQLITE_SERIES
    finished_at = now if state == "SUCCEEDED" else "NULL"
    with engine.begin() as conn:
        conn.execute(
            text(f"""
            INSERT INTO jobs (job_id, job_type, pool, state, run_after, created_at,
                              updated_at, finished_at, attempt_count, schedule_name,
                              scheduled_for)
            SELECT {uid}, 'type' || (i % 20), 'pool' || ((i % 20) % 4), '{state}',
                   {now}, {now}, {now}, {finished_at}, 0,
                   CASE WHEN i % 2 = 0 THEN 'schedule-' || (i % 100000) END,
                   CASE WHEN i % 2 = 0 THEN {now} END
            FROM {series}
            """),
            {"n": n},
        )


def fill_waiting(engine: Engine, waiting: int) -> None:
    """The waiting jobs (once), then ``VACUUM ANALYZE`` of every table on PostgreSQL."""
    with engine.connect() as conn:
        queued = conn.execute(text("SELECT count(*) FROM jobs WHERE state = 'QUEUED'")).scalar()
    if not queued:
        insert_jobs(engine, waiting, "QUEUED")
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))


def held(engine: Engine) -> tuple[int, int]:
    """(finished jobs, schedules) in a kept database."""
    with engine.connect() as conn:
        finished = conn.execute(
            text("SELECT count(*) FROM jobs WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')")
        ).scalar_one()
        n_schedules = conn.execute(text("SELECT count(*) FROM schedules")).scalar_one()
    return int(finished), int(n_schedules)


_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def server_cpu_ms(engine: Engine) -> float | None:
    """CPU time used so far by the server processes of this database (a local server only).

    Read from ``/proc`` (user + system time of each backend), so the database's
    share of a scrape is measured the way this process's own is: apart from
    the waiting a loaded machine adds. None where ``/proc`` cannot tell.
    """
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        pids = conn.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        ).scalars()
        total = 0.0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += (int(fields[11]) + int(fields[12])) * _TICK_MS  # utime, stime
    return total


def timed(
    fn: Callable[[], object], runs: int, server: Callable[[], float | None] | None = None
) -> tuple[float, float, float, float, float | None]:
    """p50 and p95 of the wall time, its minimum, and the p50 of this process's CPU time
    and of the database server's (None: not measured), in ms."""
    took = []
    cpu = []
    served: list[float] = []
    for _ in range(runs):
        before = server() if server is not None else None
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        took.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        after = server() if server is not None else None
        if before is not None and after is not None:
            served.append(after - before)
    took.sort()
    p95 = took[int(0.95 * (len(took) - 1))]
    db = statistics.median(served) if served else None
    return statistics.median(took), p95, took[0], statistics.median(cpu), db


def measure(
    name: str,
    engine: Engine,
    finished: int,
    waiting: int,
    n_schedules: int,
    ceiling_ms: float,
    *,
    filled: bool = False,
    delays: bool = False,
) -> None:
    upgrade(engine)
    if filled:  # a kept database: measure what it holds
        fill_waiting(engine, waiting)
        finished, n_schedules = held(engine)
    else:
        fill_schedules(engine, n_schedules)
        fill(engine, finished, waiting)
    if delays:
        fill_delays(engine, n_schedules)
    spec = JobTypeSpec(
        name="type3", handler="m:f", max_queued=waiting, max_queue_age=timedelta(hours=1)
    )
    p50, p95, least, cpu, db = timed(
        lambda: exposition(engine, FailedCounts()),  # each one counts
        20,
        lambda: server_cpu_ms(engine),
    )

    def check() -> None:
        with engine.begin() as conn:
            check_backpressure(conn, spec, Submission(1, 0))

    c50, c95, *_ = timed(check, 50)
    size = len(exposition(engine, FailedCounts()))
    verdict = "under" if p95 < ceiling_ms else "OVER"
    print(
        f"{name:10}  {finished:>10,} finished  {waiting:>7,} waiting  {n_schedules:>7,} schedules  "
        f"scrape p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  min {least:7.1f} ms "
        f"(CPU p50: rota {cpu:6.1f} ms"
        f"{'' if db is None else f', database {db:6.1f} ms'}; "
        f"{size / 1e6:.1f} MB; p95 {verdict} the {ceiling_ms:,.0f} ms ceiling)   "
        f"backpressure check p50 {c50:5.2f} ms  p95 {c95:5.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=500_000)
    parser.add_argument("--sqlite-finished", type=int, default=1_000_000)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--schedules", type=int, default=100_000)
    parser.add_argument("--ceiling-ms", type=float, default=1000.0)
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--delay-histograms",
        action="store_true",
        help="add one rota_scheduler_delay_seconds observation per schedule (SQLite only)",
    )
    parser.add_argument(
        "--keep",
        metavar="DATABASE",
        help="fill this PostgreSQL database once and keep it; a later run measures what it holds",
    )
    args = parser.parse_args()
    admin = os.environ.get("ROTA_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    name = args.keep or f"rota_bench_metrics_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        filled = bool(
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        )
        if not filled:
            conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin).set(drivername="postgresql+psycopg", database=name)
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        measure(
            "postgresql",
            engine,
            args.finished,
            args.waiting,
            args.schedules,
            args.ceiling_ms,
            filled=filled,
        )
    finally:
        engine.dispose()
        if args.keep is None:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if args.no_sqlite:
        return
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            measure(
                "sqlite",
                engine,
                args.sqlite_finished,
                args.waiting,
                args.schedules,
                args.ceiling_ms,
                delays=args.delay_histograms,
            )
        finally:
            engine.dispose()


if __name__ == "__main__":
    main()
