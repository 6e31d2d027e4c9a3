"""Bulk operator commands on a large table: printed, never asserted.

``rota replay --state FAILED --type bench`` over N FAILED jobs and ``rota cancel
--type bench --state QUEUED`` over the same N jobs, run as real ``rota``
processes, on SQLite and on PostgreSQL. Meanwhile a probe thread makes one small
write transaction after another (an enqueue, as a producer would) and records
how long each took: with bounded batches the probe keeps going; one giant
transaction would stall it (on SQLite, behind the write lock) for the whole run.
A sparse case (N/1000 FAILED jobs among N finished ones) shows the cost of
finding few matches in a large table.

Run: ``python -m bench.bench_bulk [N [BACKEND]]`` (default 200,000 jobs, both
backends; ``ROTA_BENCH_PG_URL`` names the PostgreSQL server, default
``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy import Engine, update
from sqlalchemy.engine import make_url

from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.tables import jobs
from rota.migrations.runner import upgrade
from rota.producer.enqueue import enqueue

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get("ROTA_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
BENCH = JobTypeSpec(name="bench", handler="bench.handlers:noop")
PROBE = JobTypeSpec(name="probe", handler="bench.handlers:noop")


@contextmanager
def database(backend: str) -> Iterator[tuple[str, Engine]]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            engine = make_engine(url)
            try:
                upgrade(engine)
                yield url, engine
            finally:
                engine.dispose()
        return
    name = f"rota_bench_bulk_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = (
        make_url(ADMIN_URL.replace("postgresql://", "postgresql+psycopg://", 1))
        .set(database=name)
        .render_as_string(hide_password=False)
    )
    engine = make_engine(url)
    try:
        upgrade(engine)
        yield url, engine
    finally:
        engine.dispose()
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fill(engine: Engine, count: int, state: str, job_type: JobTypeSpec = BENCH) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, [BENCH, PROBE])
    for start in range(0, count, 5000):
        new = [NewJob.of_type(job_type) for _ in range(min(5000, count - start))]
        with engine.begin() as conn:
            insert_jobs_or_skip(conn, new)
            conn.execute(
                update(jobs)
                .where(jobs.c.job_id.in_([j.job_id for j in new]))
                .values(
                    state=state, attempt_count=job_type.max_attempts if state == "FAILED" else 0
                )
            )


def run_with_probe(engine: Engine, url: str, *argv: str) -> tuple[float, str, list[float]]:
    """Run ``rota ARGV`` while a producer enqueues; (seconds, its output, probe latencies)."""
    stop = threading.Event()
    latencies: list[float] = []

    def probe() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            with engine.begin() as conn:
                enqueue(conn, PROBE.name)
            latencies.append(time.perf_counter() - t)
            time.sleep(0.02)  # a producer writing ~40 times a second

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *argv, "--db", url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    took = time.perf_counter() - started
    stop.set()
    thread.join()
    return took, done.stdout.strip(), latencies


def report(label: str, count: int, took: float, out: str, latencies: list[float]) -> None:
    ms = sorted(x * 1000 for x in latencies)
    p50 = statistics.median(ms) if ms else float("nan")
    p99 = ms[int(len(ms) * 0.99)] if ms else float("nan")
    print(
        f"  {label:<34} {took:6.1f} s  {count / took:8,.0f} jobs/s  | producer writes "
        f"during it: {len(ms)}, p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"max {ms[-1] if ms else 0:.0f} ms"
    )
    print(f"    rota: {out}")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    backends = sys.argv[2:] or ["sqlite", "postgresql"]
    for backend in backends:
        print(f"{backend}: {count:,} jobs")
        with database(backend) as (url, engine):
            fill(engine, count, "FAILED")
            took, out, lat = run_with_probe(
                engine, url, "replay", "--state", "FAILED", "--type", "bench", "--reason", "bench"
            )
            report("replay --state FAILED --type bench", count, took, out, lat)
            took, out, lat = run_with_probe(
                engine, url, "cancel", "--state", "QUEUED", "--type", "bench"
            )
            report("cancel --state QUEUED --type bench", count, took, out, lat)
        with database(backend) as (url, engine):
            fill(engine, count, "SUCCEEDED")
            fill(engine, max(1, count // 1000), "FAILED")
            took, out, lat = run_with_probe(
                engine, url, "replay", "--state", "FAILED", "--type", "bench"
            )
            report(
                f"sparse: {max(1, count // 1000)} FAILED among {count:,}",
                max(1, count // 1000),
                took,
                out,
                lat,
            )


if __name__ == "__main__":
    main()
