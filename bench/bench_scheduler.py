"""Scheduler benchmarks on local PostgreSQL: printed, never asserted.

The pgbench ceiling (``bench.pg_ceiling``, single-row UPDATEs on one
connection) is measured first in the same run: the machines are noisy, the
ratio is what compares across runs.

1. Materialisation: occurrences made per second when 10,000 schedules are due
   at once (``every:`` rules, and ``cron`` rules, whose evaluation costs more).
2. Tick cost with 100,000 schedules of which none is due.
3. Scheduler delay (job ``created_at`` - ``scheduled_for``), p50 and p99, with
   three ``rota scheduler`` processes and 1,000 per-second schedules.

Run: ``python -m bench.bench_scheduler`` (``ROTA_BENCH_PG_URL`` names the server,
default ``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.engine import make_url

from bench.pg_ceiling import pgbench_single_row_update_tps
from rota.core.config import JobTypeSpec, MisfirePolicy, ScheduleFile, ScheduleSpec
from rota.core.database import make_engine
from rota.core.tables import jobs, schedules
from rota.migrations.runner import upgrade
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.service import SchedulerService

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get("ROTA_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
T0 = datetime(2026, 3, 2, tzinfo=UTC)
JOB_TYPE = JobTypeSpec(name="bench", handler="bench.handlers:noop")


@contextmanager
def fresh_database() -> Iterator[tuple[str, Engine]]:
    name = f"rota_bench_sched_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = (
        make_url(ADMIN_URL.replace("postgresql://", "postgresql+psycopg://", 1))
        .set(database=name)
        .render_as_string(hide_password=False)
    )
    engine = make_engine(url, pool_size=4)
    try:
        upgrade(engine)
        yield url, engine
    finally:
        engine.dispose()
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def apply(engine: Engine, specs: list[ScheduleSpec], now: datetime | None) -> None:
    sf = ScheduleFile("bench.yaml", {JOB_TYPE.name: JOB_TYPE}, {s.name: s for s in specs})
    apply_schedule_file(engine, sf, now=now)


def materialisation(kind: str, count: int = 10_000, warm_ticks: int = 3) -> tuple[float, float]:
    """(cold, warm) occurrences per second: the first tick parses and compiles every rule.

    Warm is the median of ``warm_ticks`` ticks (one minute of occurrences each).
    """
    with fresh_database() as (_url, engine):
        rule: dict[str, object] = (
            {"every": timedelta(minutes=1)} if kind == "every" else {"cron": "* * * * *"}
        )
        specs = [
            ScheduleSpec(name=f"s{i:06d}", job_type="bench", **rule)  # type: ignore[arg-type]
            for i in range(count)
        ]
        apply(engine, specs, T0)
        service = SchedulerService(engine)
        rates = []
        for minute in range(1, 2 + warm_ticks):
            started = time.perf_counter()
            result = service.run_once(T0 + timedelta(minutes=minute, seconds=1))
            elapsed = time.perf_counter() - started
            assert result.created == count, result
            rates.append(count / elapsed)
        return rates[0], statistics.median(rates[1:])


def idle_tick(count: int = 100_000, ticks: int = 200) -> tuple[float, float]:
    with fresh_database() as (_url, engine):
        definition = ScheduleSpec(name="x", job_type="bench", every=timedelta(days=1))
        far = T0 + timedelta(days=30)
        with engine.begin() as conn:
            for start in range(0, count, 10_000):
                conn.execute(
                    schedules.insert(),
                    [
                        {
                            "name": f"s{i:06d}",
                            "job_type": "bench",
                            "definition": {**definition.to_json(), "name": f"s{i:06d}"},
                            "definition_hash": f"h{i}",
                            "cursor_at": T0,
                            "next_fire_at": far + timedelta(seconds=i),
                            "created_at": T0,
                            "updated_at": T0,
                        }
                        for i in range(start, min(count, start + 10_000))
                    ],
                )
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE schedules")
            conn.commit()
        service = SchedulerService(engine)
        service.run_once(T0)  # warm the pool
        timings = []
        for _ in range(ticks):
            started = time.perf_counter()
            result = service.run_once(T0 + timedelta(days=1))
            timings.append(time.perf_counter() - started)
            assert result.created == 0
        timings.sort()
        return statistics.median(timings) * 1000, timings[int(len(timings) * 0.99)] * 1000


def scheduler_delay(
    replicas: int = 3, count: int = 1000, seconds: float = 15.0
) -> tuple[float, float, int]:
    with fresh_database() as (url, engine):
        specs = [
            ScheduleSpec(
                name=f"s{i:04d}",
                job_type="bench",
                every=timedelta(seconds=1),
                misfire=MisfirePolicy.CATCH_UP,
            )
            for i in range(count)
        ]
        apply(engine, specs, None)
        with tempfile.TemporaryDirectory() as logs:
            procs = []
            for i in range(replicas):
                log = (Path(logs) / f"r{i}.log").open("wb")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "rota.cli.main", "scheduler", "--db", url],
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env={**os.environ, "PYTHONPATH": str(ROOT)},
                    )
                )
                log.close()
            time.sleep(3)  # start-up and the first catch-up
            with engine.begin() as conn:
                conn.execute(delete(jobs))
                start_at = conn.execute(select(func.now())).scalar_one()
            time.sleep(seconds)
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(timeout=30)
        with engine.connect() as conn:
            rows = conn.execute(
                select(jobs.c.created_at, jobs.c.scheduled_for).where(
                    jobs.c.scheduled_for > start_at + timedelta(seconds=1)
                )
            ).all()
        delays = sorted((c - s).total_seconds() * 1000 for c, s in rows)
        p50 = statistics.median(delays)
        p99 = delays[int(len(delays) * 0.99)]
        return p50, p99, len(delays)


def main() -> None:
    print("rota scheduler benchmarks (local PostgreSQL)")
    try:
        ceiling: float | None = pgbench_single_row_update_tps(ADMIN_URL, clients=1)
        print(f"  pgbench ceiling, single-row UPDATE, 1 connection: {ceiling:,.0f} tps")
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        ceiling = None
        print(f"  pgbench ceiling not measured: {exc}")
    for kind in ("every", "cron"):
        cold, warm = materialisation(kind)
        ratio = f", {warm / ceiling:.2f}x the ceiling" if ceiling else ""
        print(
            f"  materialisation, 10,000 {kind} schedules due at once: {warm:,.0f} occurrences/s "
            f"(median of 3 warm ticks{ratio}; first tick, rules not yet compiled: {cold:,.0f}/s)"
        )
    p50, p99 = idle_tick()
    print(f"  tick with 100,000 schedules, none due: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    d50, d99, n = scheduler_delay()
    print(
        f"  scheduler delay, 3 replicas x 1,000 per-second schedules ({n:,} jobs): "
        f"p50 {d50:.1f} ms, p99 {d99:.1f} ms"
    )


if __name__ == "__main__":
    main()
