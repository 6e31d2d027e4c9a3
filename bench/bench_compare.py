"""rota's executor at its defaults against pgqueuer and the pgbench ceiling, in one run.

Each round runs, back to back on the same PostgreSQL server (the order turns
from round to round, so drift on a busy machine hits every side alike):

* rota: a fresh database holding N queued no-op jobs (inserted before the
  clock starts); P ``rota executor`` processes at the DEFAULT settings, started
  with ``--db`` and no other flag (the default log level, INFO, included: what a
  user runs); the clock runs from their
  start until every job is SUCCEEDED; every job is then verified (SUCCEEDED
  once, one attempt row);
* pgqueuer: a fresh database holding N queued no-op jobs (its own enqueue);
  its own worker (``bench.pgqueuer_worker``: ``pgqueuer.run`` at its defaults,
  batch size 10) from its start until its queue table is empty;
* pgbench: one single-row UPDATE per transaction, with P connections
  (``bench.pg_ceiling``), for ``--pgbench-seconds``;
* with ``--sqlite``, rota on SQLite at the defaults too (P processes);
* with ``--log-levels WARNING,DEBUG``, rota on PostgreSQL again, once per level,
  started with ``--log-level LEVEL``: a departure from the defaults, labelled
  ``--log-level LEVEL`` in every row, to measure what the default log level costs
  (the ``WARNING`` run must read at most 5% more than the defaults) and what
  DEBUG's per-job lines cost. ``--executor-args`` departs likewise, and is
  named in the rows too.

For each side: jobs/s over the wall clock (start-up included) and steady
(between the 10% and 90% marks); between the same marks the CPU seconds per
1,000 jobs of the PostgreSQL backends serving the workers (utime + stime from
``/proc/<pid>/stat`` of the backends listed in ``pg_stat_activity``, so both
sides are measured the same way; the progress monitor's own backend is left
out) and of the worker processes, and transactions per job
(``pg_stat_database`` of the side's own database, minus the monitor's own
queries). The last table gives the medians over the rounds and the ratios
that the issue asks for: rota / pgqueuer (target >= 2.0, with PostgreSQL
backend CPU per job <= 0.6x pgqueuer's) and each / pgbench.

Run: ``python -m bench.bench_compare [--rounds 3] [--jobs 20000]
[--processes 2] [--sqlite] [--log-levels WARNING,DEBUG]``
(``pip install -e '.[bench]'`` for pgqueuer).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from bench.bench_executor import (
    DEFAULT_PG_URL,
    CpuSnapshot,
    Monitor,
    SteadyCpu,
    _crossing,
    fresh_database,
    insert_noop_jobs,
    libpq,
    start_executors,
    verify,
)
from bench.pg_ceiling import pgbench_single_row_update_tps

ROOT = Path(__file__).resolve().parent.parent
POLL_SECONDS = 0.025
DRAIN_LIMIT_SECONDS = 300.0


@dataclass
class Drain:
    """One side's run: N jobs drained by its workers."""

    side: str
    jobs: int
    seconds: float
    steady_rate: float
    cpu: SteadyCpu
    xacts_per_job: float | None
    verified: str

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


class _Counter:
    """A side connection to one PostgreSQL database: progress, backends, xacts."""

    def __init__(self, libpq_url: str, done_sql: str) -> None:
        self._conn = psycopg.connect(libpq_url, autocommit=True)
        self._done_sql = done_sql
        self.queries = 0  # this connection's own statements, each its own transaction

    def close(self) -> None:
        self._conn.close()

    def _one(self, sql: str) -> Any:
        self.queries += 1
        row = self._conn.execute(sql).fetchone()
        assert row is not None
        return row[0]

    def done(self) -> int:
        return int(self._one(self._done_sql))

    def backend_pids(self) -> list[int]:
        self.queries += 1
        rows = self._conn.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        return [int(r[0]) for r in rows]

    def xacts(self) -> int:
        self._one("SELECT pg_stat_clear_snapshot()")
        return int(
            self._one(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                "WHERE datname = current_database()"
            )
        )


def watch(
    started: float,
    count: int,
    done: Callable[[], int],
    worker_pids: Sequence[int],
    backend_pids: Callable[[], list[int]],
    check_alive: Callable[[], None],
) -> tuple[list[tuple[float, int]], list[CpuSnapshot]]:
    """Poll progress until ``count`` are done: (elapsed since ``started``, done), CPU marks."""
    samples: list[tuple[float, int]] = [(0.0, 0)]
    marks: list[CpuSnapshot] = []
    while samples[-1][1] < count:
        time.sleep(POLL_SECONDS)
        n = done()
        elapsed = time.perf_counter() - started
        samples.append((elapsed, n))
        if len(marks) < 2 and n >= (0.1, 0.9)[len(marks)] * count:
            marks.append(CpuSnapshot.take(n, worker_pids, backend_pids()))
        if elapsed > DRAIN_LIMIT_SECONDS:
            raise RuntimeError(f"only {n} of {count} jobs done after {elapsed:.0f} s")
        check_alive()
    while len(marks) < 2:
        marks.append(CpuSnapshot.take(samples[-1][1], worker_pids, backend_pids()))
    return samples, marks


def _steady(samples: Sequence[tuple[float, int]], count: int) -> float:
    between = _crossing(samples, 0.9 * count) - _crossing(samples, 0.1 * count)
    return 0.8 * count / max(1e-9, between)


# -- rota ---------------------------------------------------------------------------


def rota_drain(
    backend: str,
    admin_url: str,
    count: int,
    processes: int,
    workdir: Path,
    extra: Sequence[str] = (),
) -> Drain:
    with fresh_database(backend, admin_url) as db:
        insert_noop_jobs(db, count)
        counter = (
            _Counter(db.libpq_url, "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED'")
            if db.libpq_url is not None
            else None
        )
        lite = Monitor(db) if counter is None else None
        try:
            before = counter.xacts() if counter is not None else 0
            queries_before = counter.queries if counter is not None else 0
            started = time.perf_counter()
            executors = start_executors(
                db, processes, None, workdir, tag=f"{backend}-default", extra=extra
            )
            try:
                if counter is not None:
                    samples, marks = watch(
                        started,
                        count,
                        counter.done,
                        [p.pid for p in executors.procs],
                        counter.backend_pids,
                        executors.check_alive,
                    )
                else:
                    assert lite is not None
                    samples, marks = watch(
                        started,
                        count,
                        lite.succeeded,
                        [p.pid for p in executors.procs],
                        list,
                        executors.check_alive,
                    )
            finally:
                executors.stop()
            xacts = None
            if counter is not None:
                time.sleep(0.3)  # exiting backends flush their statistics
                own = counter.queries - queries_before + 2
                xacts = (counter.xacts() - before - own) / count
        finally:
            if counter is not None:
                counter.close()
            if lite is not None:
                lite.close()
        return Drain(
            side=" ".join([f"rota {backend}, {processes} executors", *extra]),
            jobs=count,
            seconds=samples[-1][0],
            steady_rate=_steady(samples, count),
            cpu=SteadyCpu.between(marks[0], marks[-1]),
            xacts_per_job=xacts,
            verified=verify(db, count),
        )


# -- pgqueuer -------------------------------------------------------------------------


@contextmanager
def pg_database(admin_url: str, prefix: str) -> Iterator[str]:
    """A fresh empty PostgreSQL database (libpq URL), dropped afterwards."""
    admin = libpq(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pgqueuer_drain(admin_url: str, count: int, workdir: Path) -> Drain:
    from bench.pgqueuer_worker import install_and_enqueue

    with pg_database(admin_url, "rota_bench_pgq") as url:
        install_and_enqueue(url, count)
        counter = _Counter(url, f"SELECT {count} - count(*) FROM pgqueuer")
        log_path = workdir / f"pgqueuer-{uuid.uuid4().hex[:6]}.log"
        try:
            before = counter.xacts()
            queries_before = counter.queries
            started = time.perf_counter()
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "bench.pgqueuer_worker"],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(ROOT), "ROTA_BENCH_PGQ_DSN": url},
                )

            def alive() -> None:
                if proc.poll() is not None:
                    tail = log_path.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"pgqueuer worker exited with {proc.returncode}:\n{tail}")

            try:
                samples, marks = watch(
                    started, count, counter.done, [proc.pid], counter.backend_pids, alive
                )
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            time.sleep(0.3)
            own = counter.queries - queries_before + 2
            xacts = (counter.xacts() - before - own) / count
        finally:
            counter.close()
        return Drain(
            side="pgqueuer, 1 worker (its defaults)",
            jobs=count,
            seconds=samples[-1][0],
            steady_rate=_steady(samples, count),
            cpu=SteadyCpu.between(marks[0], marks[-1]),
            xacts_per_job=xacts,
            verified="queue emptied",
        )


def pgbench_tps(admin_url: str, clients: int, seconds: int) -> float:
    with pg_database(admin_url, "rota_bench_ceiling") as url:
        return pgbench_single_row_update_tps(url, clients=clients, seconds=seconds)


# -- report ---------------------------------------------------------------------------


@dataclass
class Round:
    rota: Drain
    pgqueuer: Drain | None
    pgbench: float
    sqlite: Drain | None = None
    # rota on PostgreSQL started with --log-level LEVEL, by level (flag-tuned, labelled).
    levels: dict[str, Drain] = field(default_factory=dict)


def _row(d: Drain, ceiling: float) -> str:
    xacts = f"{d.xacts_per_job:.3f}" if d.xacts_per_job is not None else "-"
    backends = f"{d.cpu.backends:.3f}" if d.xacts_per_job is not None else "-"
    return (
        f"  {d.side:<36} {d.rate:>8,.0f} {d.steady_rate:>9,.0f} {d.rate / ceiling:>6.2f} "
        f"{backends:>9} {d.cpu.executors:>8.3f} {xacts:>7} {d.cpu.busy_share:>5.0%}  {d.verified}"
    )


HEADER = (
    f"  {'side':<36} {'jobs/s':>8} {'steady/s':>9} {'/pgb':>6} "
    f"{'PG CPU/1k':>9} {'wkr CPU':>8} {'xact/j':>7} {'busy':>5}"
)


def print_round(i: int, r: Round) -> None:
    print(f"\nround {i}: pgbench single-row UPDATE, same connections: {r.pgbench:,.0f} tps")
    print(HEADER)
    for d in (r.rota, r.pgqueuer, r.sqlite, *r.levels.values()):
        if d is not None:
            print(_row(d, r.pgbench))
    for level, d in r.levels.items():
        print(
            f"  --log-level {level} / defaults: {d.rate / r.rota.rate:.3f} (wall), "
            f"{d.steady_rate / r.rota.steady_rate:.3f} (steady)",
            flush=True,
        )
    if r.pgqueuer is not None:
        print(
            f"  rota / pgqueuer: {r.rota.rate / r.pgqueuer.rate:.2f} (wall), "
            f"{r.rota.steady_rate / r.pgqueuer.steady_rate:.2f} (steady); PG CPU per job "
            f"{r.rota.cpu.backends / max(1e-9, r.pgqueuer.cpu.backends):.2f}x pgqueuer's",
            flush=True,
        )


def print_summary(rounds: Sequence[Round]) -> None:
    def med(values: Sequence[float]) -> float:
        return statistics.median(values)

    print("\nMedians over", len(rounds), "round(s) (each ratio is taken within its round first)")
    print(f"  pgbench single-row UPDATE: {med([r.pgbench for r in rounds]):,.0f} tps")
    sides: dict[str, list[tuple[Drain, float]]] = {
        "rota": [(r.rota, r.pgbench) for r in rounds],
        "pgqueuer": [(r.pgqueuer, r.pgbench) for r in rounds if r.pgqueuer is not None],
        "rota SQLite": [(r.sqlite, r.pgbench) for r in rounds if r.sqlite is not None],
    }
    for name, drains in sides.items():
        if not drains:
            continue
        cpu_text = (
            f"; PG backend CPU {med([d.cpu.backends for d, _ in drains]):.3f} s per 1,000 jobs"
            if drains[0][0].xacts_per_job is not None
            else f"; worker CPU {med([d.cpu.executors for d, _ in drains]):.3f} s per 1,000 jobs"
        )
        print(
            f"  {name:<12} {med([d.rate for d, _ in drains]):>8,.0f} jobs/s "
            f"(steady {med([d.steady_rate for d, _ in drains]):,.0f}); "
            f"{med([d.rate / c for d, c in drains]):.2f}x pgbench{cpu_text}"
        )
    for level in rounds[0].levels:
        wall = med([r.levels[level].rate / r.rota.rate for r in rounds])
        steady = med([r.levels[level].steady_rate / r.rota.steady_rate for r in rounds])
        # Worker CPU is in seconds per 1,000 jobs, that is milliseconds per job.
        cpu_ms = med([r.levels[level].cpu.executors - r.rota.cpu.executors for r in rounds])
        print(
            f"  rota --log-level {level} / rota at the defaults: {wall:.3f} wall, "
            f"{steady:.3f} steady; executor CPU per job {cpu_ms:+.4f} ms"
        )
    paired = [r for r in rounds if r.pgqueuer is not None]
    if paired:
        wall = med([r.rota.rate / r.pgqueuer.rate for r in paired])  # type: ignore[union-attr]
        steady = med([r.rota.steady_rate / r.pgqueuer.steady_rate for r in paired])  # type: ignore[union-attr]
        cpu = med([r.rota.cpu.backends / max(1e-9, r.pgqueuer.cpu.backends) for r in paired])  # type: ignore[union-attr]
        print(
            f"  rota / pgqueuer: {wall:.2f} wall, {steady:.2f} steady (target >= 2.0); "
            f"PG backend CPU per job {cpu:.2f}x pgqueuer's (target <= 0.6)"
        )


def run(
    admin_url: str,
    *,
    rounds: int,
    count: int,
    processes: int,
    pgqueuer: bool,
    sqlite: bool,
    pgbench_seconds: int,
    extra: Sequence[str] = (),
    levels: Sequence[str] = (),
) -> list[Round]:
    results: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="rota_bench_cmp_") as tmp:
        workdir = Path(tmp)
        for i in range(rounds):
            steps: list[str] = ["rota", "pgqueuer", "pgbench"]
            if sqlite:
                steps.append("sqlite")
            steps += [f"level:{level}" for level in levels]
            steps = steps[i % len(steps) :] + steps[: i % len(steps)]  # turn the order
            got: dict[str, Any] = {}
            for step in steps:
                if step == "rota":
                    got[step] = rota_drain(
                        "postgresql", admin_url, count, processes, workdir, extra
                    )
                elif step == "pgqueuer" and pgqueuer:
                    got[step] = pgqueuer_drain(admin_url, count, workdir)
                elif step == "pgbench":
                    got[step] = pgbench_tps(admin_url, processes, pgbench_seconds)
                elif step == "sqlite":
                    got[step] = rota_drain("sqlite", admin_url, count, processes, workdir, extra)
                elif step.startswith("level:"):
                    flag = ["--log-level", step.removeprefix("level:")]
                    got[step] = rota_drain(
                        "postgresql", admin_url, count, processes, workdir, [*extra, *flag]
                    )
            r = Round(
                got["rota"],
                got.get("pgqueuer"),
                got["pgbench"],
                got.get("sqlite"),
                {level: got[f"level:{level}"] for level in levels},
            )
            results.append(r)
            print_round(i + 1, r)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs per drain")
    parser.add_argument("--processes", type=int, default=2, help="rota executor processes")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument("--no-pgqueuer", action="store_true", help="rota and pgbench only")
    parser.add_argument("--sqlite", action="store_true", help="rota on SQLite too")
    parser.add_argument("--pgbench-seconds", type=int, default=5)
    parser.add_argument(
        "--executor-args",
        default="",
        metavar="ARGS",
        help='extra `rota executor` options, e.g. "--concurrency 32" (default: none)',
    )
    parser.add_argument(
        "--log-levels",
        default="",
        metavar="LEVELS",
        help="also run rota with --log-level LEVEL, for each of these (e.g. WARNING,DEBUG), "
        "beside the defaults in every round (default: none)",
    )
    args = parser.parse_args(argv)
    levels = [v.strip().upper() for v in args.log_levels.split(",") if v.strip()]
    started_with = f"`rota executor --db URL {args.executor_args}`".replace(" `", "`")
    print(
        f"rota ({args.processes} executors, each started as {started_with}: "
        f"{'the defaults' if not args.executor_args else 'flags as shown'}) vs pgqueuer "
        f"(its defaults, 1 worker) vs pgbench ({args.processes} connections): "
        f"{args.jobs:,} no-op jobs per drain, {args.rounds} round(s), {os.cpu_count()} CPU(s)"
    )
    for level in levels:
        print(
            f"  departure, labelled in its rows: rota again with --log-level {level}, "
            "to measure what the log level costs against the defaults"
        )
    rounds = run(
        args.pg_url,
        rounds=args.rounds,
        count=args.jobs,
        processes=args.processes,
        pgqueuer=not args.no_pgqueuer,
        sqlite=args.sqlite,
        pgbench_seconds=args.pgbench_seconds,
        extra=args.executor_args.split(),
        levels=levels,
    )
    print_summary(rounds)
    drains = [d for r in rounds for d in (r.rota, r.sqlite, *r.levels.values()) if d is not None]
    bad = [d for d in drains if d.verified != "verified"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
