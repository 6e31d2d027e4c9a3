"""Executor benchmarks on PostgreSQL and SQLite: printed, never asserted.

1. Throughput. For each backend and each process count P: a fresh database
   with N no-op jobs (inserted before the clock starts), then P real
   ``rota executor`` processes; the clock runs from their start until every
   job is SUCCEEDED, so start-up is included in ``jobs/s``. ``steady jobs/s``
   is the rate between the 10% and 90% marks. Afterwards every job is checked:
   SUCCEEDED, ``attempt_count`` 1, exactly one attempt row, SUCCEEDED and closed.
   On PostgreSQL the ceiling is measured in the same run: pgbench, one
   single-row UPDATE per transaction, with P connections.
2. Where the time goes, from the same runs, between the 10% and 90% marks:
   CPU seconds per 1,000 jobs of the executor processes, of their PostgreSQL
   backends and of everything else on the machine (a high "other" flags a run
   disturbed by other work), and on PostgreSQL transactions, WAL bytes and WAL
   flushes per job (WAL figures are the whole cluster's). ``--probe`` adds a
   run of each case under ``bench.executor_probe``, which counts and times the
   executors' statements by kind: use it for counts, not for rates.
3. Wake-up latency: one idle executor (on PostgreSQL with a 5 s poll interval,
   so only LISTEN/NOTIFY explains a fast start), one job enqueued at a time;
   latency = ``time.time()`` at handler start - ``time.time()`` just after the
   enqueueing transaction's commit returned. SQLite has no NOTIFY: there the
   executor runs with its default poll interval, printed for information.

Run: ``python -m bench.bench_executor [--jobs N] [--processes 1,2,4]
[--backends postgresql,sqlite] [--concurrency C] [--pg-url URL] [--repeat R]``.
The default ``--concurrency`` is 32, not the executor's default of 8: a claim
takes at most as many jobs as there are free slots, so concurrency is also the
batch size. On a shared machine use ``--repeat`` and compare ratios.
``--py-spy DIR`` records a py-spy profile of every executor process: samples
of threads holding the GIL, i.e. the executor's Python CPU, as collapsed
stacks (``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, and_, case, func, select, true
from sqlalchemy.engine import make_url

from bench.pg_ceiling import pgbench_single_row_update_tps
from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.tables import job_attempts, jobs
from rota.migrations.runner import upgrade
from rota.producer.enqueue import enqueue

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG_URL = os.environ.get("ROTA_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
NOOP = JobTypeSpec(name="bench.noop", handler="bench.handlers:noop")
WAKEUP = JobTypeSpec(name="bench.wakeup", handler="bench.handlers:record_start")
INSERT_CHUNK = 1000
PROGRESS_POLL_SECONDS = 0.025
DRAIN_LIMIT_SECONDS = 300.0
PGBENCH_SECONDS = 5
WAKEUP_POLL_SECONDS_PG = 5.0  # long, so that only NOTIFY can explain a fast start
WAKEUP_CONCURRENCY = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- databases -----------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    backend: str  # "postgresql" | "sqlite"
    url: str  # SQLAlchemy URL, what `rota --db` takes
    name: str  # database name (PostgreSQL) or file path (SQLite)
    libpq_url: str | None = None  # PostgreSQL only: for psycopg and pgbench


def libpq(url: str) -> str:
    """A SQLAlchemy or libpq PostgreSQL URL as the libpq form (for psycopg and pgbench)."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def pg_database(admin_url: str, name: str) -> Database:
    """The PostgreSQL database ``name`` on ``admin_url``'s server."""
    plain = make_url(libpq(admin_url)).set(database=name)
    return Database(
        "postgresql",
        plain.set(drivername="postgresql+psycopg").render_as_string(hide_password=False),
        name,
        plain.render_as_string(hide_password=False),
    )


@contextmanager
def fresh_database(backend: str, admin_url: str, template: str | None = None) -> Iterator[Database]:
    """An empty migrated database holding the bench job types; dropped afterwards.

    With ``template`` (PostgreSQL), a file copy of that database instead (it
    must hold the schema already): its pages, free space map and all, as they
    are.
    """
    if backend == "postgresql":
        admin = libpq(admin_url)
        name = f"rota_bench_exec_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            if template is None:
                conn.execute(f'CREATE DATABASE "{name}"')
            else:
                strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"{strategy}')
        db = pg_database(admin_url, name)
        try:
            if template is None:
                prepare_database(db)
            yield db
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        with tempfile.TemporaryDirectory(prefix="rota_bench_") as tmp:
            path = os.path.join(tmp, "bench.db")
            db = Database(backend, f"sqlite:///{path}", path)
            prepare_database(db)
            yield db


def prepare_database(db: Database) -> None:
    """Migrate ``db`` and register the bench job types."""
    engine = make_engine(db.url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            upsert_job_types(conn, [NOOP, WAKEUP])
    finally:
        engine.dispose()


def insert_noop_jobs(db: Database, count: int) -> None:
    engine = make_engine(db.url)
    try:
        for start in range(0, count, INSERT_CHUNK):
            batch = [NewJob.of_type(NOOP) for _ in range(min(INSERT_CHUNK, count - start))]
            with engine.begin() as conn:
                insert_jobs_or_skip(conn, batch)
        with engine.connect() as conn:
            # What autovacuum would do shortly after a bulk load anyway.
            conn.exec_driver_sql("ANALYZE jobs")
            conn.exec_driver_sql("ANALYZE job_attempts")
            conn.commit()
    finally:
        engine.dispose()


class Monitor:
    """A read-only side connection: progress counts and PostgreSQL statistics."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._pg: psycopg.Connection[Any] | None = None
        self._lite: sqlite3.Connection | None = None
        if db.libpq_url is not None:
            self._pg = psycopg.connect(db.libpq_url, autocommit=True)
        else:
            self._lite = sqlite3.connect(db.name, isolation_level=None, timeout=60)

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self._lite is not None:
            self._lite.close()

    def _one(self, sql: str) -> Any:
        if self._pg is not None:
            row = self._pg.execute(sql).fetchone()
        else:
            assert self._lite is not None
            row = self._lite.execute(sql).fetchone()
        assert row is not None
        return row

    def succeeded(self) -> int:
        return int(self._one("SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED'")[0])

    def pg_counters(self) -> dict[str, float]:
        """Cumulative xacts of this database and the cluster's WAL figures."""
        assert self._pg is not None
        self._pg.execute("SELECT pg_stat_clear_snapshot()")
        xacts = self._one(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        )[0]
        wal = self._one("SELECT wal_records, wal_bytes, wal_sync FROM pg_stat_wal")
        return {
            "xacts": float(xacts),
            "wal_records": float(wal[0]),
            "wal_bytes": float(wal[1]),
            "wal_sync": float(wal[2]),
        }

    def backend_pids(self) -> list[int]:
        """The PostgreSQL backends serving the executors (everything but this connection)."""
        assert self._pg is not None
        rows = self._pg.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        return [int(r[0]) for r in rows]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine so far, over all cores."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds used so far, taken when ``done`` jobs had succeeded."""

    done: int
    executors: float
    backends: float  # PostgreSQL backends of the executors; 0 on SQLite
    machine_busy: float
    machine_total: float

    @classmethod
    def take(
        cls, done: int, executor_pids: Sequence[int], backend_pids: Sequence[int]
    ) -> CpuSnapshot:
        busy, total = machine_jiffies()
        return cls(
            done,
            sum(cpu_seconds(p) for p in executor_pids),
            sum(cpu_seconds(p) for p in backend_pids),
            busy / CLK_TCK,
            total / CLK_TCK,
        )


@dataclass(frozen=True)
class SteadyCpu:
    """CPU per 1,000 jobs between the 10% and 90% marks, and how busy the machine was."""

    executors: float
    backends: float
    other: float  # everything else on the machine: this script, WAL writer, other users
    busy_share: float  # 0..1 of all cores

    @classmethod
    def between(cls, a: CpuSnapshot, b: CpuSnapshot) -> SteadyCpu:
        per_k = 1000.0 / max(1, b.done - a.done)
        executors = b.executors - a.executors
        backends = b.backends - a.backends
        busy = b.machine_busy - a.machine_busy
        return cls(
            executors * per_k,
            backends * per_k,
            max(0.0, busy - executors - backends) * per_k,
            busy / max(1e-9, b.machine_total - a.machine_total),
        )


# -- executor processes ----------------------------------------------------------


@dataclass
class Executors:
    procs: list[subprocess.Popen[bytes]]
    logs: list[Path]
    probes: list[Path]
    spies: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def check_alive(self) -> None:
        for p, log in zip(self.procs, self.logs, strict=True):
            if p.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"executor {p.pid} exited with {p.returncode}:\n{tail}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for s in self.spies:
            try:
                s.wait(timeout=60)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()


def start_executors(
    db: Database,
    count: int,
    concurrency: int | None,
    workdir: Path,
    *,
    poll_interval: float | None = None,
    probe: bool = False,
    py_spy_dir: Path | None = None,
    tag: str = "",
    extra: Sequence[str] = (),
) -> Executors:
    """``count`` ``rota executor`` processes started as a user starts them: ``--db`` and
    nothing else (the default log level included), unless a caller passes options in
    ``extra``, ``concurrency`` or ``poll_interval`` and says so in its own output."""
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    probes: list[Path] = []
    spies: list[subprocess.Popen[bytes]] = []
    for i in range(count):
        rota_args = ["executor", "--db", db.url]
        if concurrency is not None:  # None: the executor's own default
            rota_args += ["--concurrency", str(concurrency)]
        rota_args += list(extra)
        if poll_interval is not None:
            rota_args += ["--poll-interval", str(poll_interval)]
        if probe:
            out = workdir / f"probe-{tag}-{i}.json"
            probes.append(out)
            argv = [sys.executable, "-m", "bench.executor_probe", str(out), *rota_args]
        else:
            argv = [sys.executable, "-m", "rota.cli.main", *rota_args]
        log_path = workdir / f"executor-{tag}-{i}.log"
        logs.append(log_path)
        with log_path.open("wb") as log:
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            )
    if py_spy_dir is not None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        py_spy_dir.mkdir(parents=True, exist_ok=True)
        for i, p in enumerate(procs):
            out = py_spy_dir / f"{tag}-{i}.txt"
            spies.append(
                subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(p.pid),
                        "--format",
                        "raw",
                        "--rate",
                        "200",
                        "--threads",
                        "--gil",
                        "--output",
                        str(out),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    return Executors(procs, logs, probes, spies)


# -- throughput ------------------------------------------------------------------


@dataclass
class Throughput:
    backend: str
    processes: int
    concurrency: int
    jobs: int
    seconds: float
    steady_rate: float
    verified: str
    first_job_seconds: float  # from process start until the first job succeeded
    cpu: SteadyCpu
    pg: dict[str, float] | None = None
    pgbench_tps: float | None = None
    probe: dict[str, Any] | None = None

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


def _crossing(samples: Sequence[tuple[float, int]], target: float) -> float:
    """When the done count reached ``target``, interpolated between samples."""
    for (t0, d0), (t1, d1) in itertools.pairwise(samples):
        if d1 >= target:
            if d1 == d0:
                return t1
            return t0 + (t1 - t0) * (target - d0) / (d1 - d0)
    return samples[-1][0]


def verify(db: Database, count: int, job_type: str | None = None) -> str:
    """Every job SUCCEEDED once: attempt_count 1, one attempt row, SUCCEEDED and closed.

    With ``job_type``, only the jobs of that type are counted (a scheduler may add others).
    """
    only = (jobs.c.job_type == job_type) if job_type is not None else true()
    engine = make_engine(db.url)
    try:
        with engine.begin() as conn:
            total, good = conn.execute(
                select(
                    func.count(),
                    func.coalesce(
                        func.sum(
                            case(
                                (and_(jobs.c.state == "SUCCEEDED", jobs.c.attempt_count == 1), 1),
                                else_=0,
                            )
                        ),
                        0,
                    ),
                ).where(only)
            ).one()
            attempts, attempted_jobs = conn.execute(
                select(func.count(), func.count(func.distinct(job_attempts.c.job_id)))
                .select_from(job_attempts.join(jobs, jobs.c.job_id == job_attempts.c.job_id))
                .where(only)
            ).one()
            matching = conn.execute(
                select(func.count())
                .select_from(
                    jobs.join(
                        job_attempts,
                        and_(
                            job_attempts.c.job_id == jobs.c.job_id,
                            job_attempts.c.lease_generation == jobs.c.lease_generation,
                        ),
                    )
                )
                .where(
                    job_attempts.c.attempt == 1,
                    job_attempts.c.outcome == "SUCCEEDED",
                    job_attempts.c.ended_at.is_not(None),
                    only,
                )
            ).scalar_one()
    finally:
        engine.dispose()
    problems = []
    if total != count:
        problems.append(f"{total} jobs, expected {count}")
    if good != count:
        problems.append(f"{count - good} jobs not SUCCEEDED with attempt_count 1")
    if attempts != count or attempted_jobs != count:
        problems.append(f"{attempts} attempt rows over {attempted_jobs} jobs")
    if matching != count:
        problems.append(f"{count - matching} jobs without their one SUCCEEDED attempt row")
    return "verified" if not problems else "FAILED: " + "; ".join(problems)


def throughput(
    backend: str,
    admin_url: str,
    count: int,
    processes: int,
    concurrency: int,
    workdir: Path,
    *,
    probe: bool = False,
    py_spy_dir: Path | None = None,
    pgbench: bool = True,
) -> Throughput:
    tag = f"{backend}-{processes}p{'-probe' if probe else ''}"
    with fresh_database(backend, admin_url) as db:
        insert_noop_jobs(db, count)
        monitor = Monitor(db)
        try:
            before = monitor.pg_counters() if backend == "postgresql" else None
            started = time.perf_counter()
            executors = start_executors(
                db, processes, concurrency, workdir, probe=probe, py_spy_dir=py_spy_dir, tag=tag
            )
            pids = [p.pid for p in executors.procs]
            marks: list[CpuSnapshot] = []
            try:
                samples: list[tuple[float, int]] = [(0.0, 0)]
                while samples[-1][1] < count:
                    time.sleep(PROGRESS_POLL_SECONDS)
                    done = monitor.succeeded()
                    elapsed = time.perf_counter() - started
                    samples.append((elapsed, done))
                    if len(marks) < 2 and done >= (0.1, 0.9)[len(marks)] * count:
                        backends = monitor.backend_pids() if backend == "postgresql" else []
                        marks.append(CpuSnapshot.take(done, pids, backends))
                    if elapsed > DRAIN_LIMIT_SECONDS:
                        raise RuntimeError(
                            f"{backend}, {processes} process(es): only {done} of "
                            f"{count} jobs done after {elapsed:.0f} s"
                        )
                    executors.check_alive()
                while len(marks) < 2:  # a tiny run can pass both marks between two polls
                    backends = monitor.backend_pids() if backend == "postgresql" else []
                    marks.append(CpuSnapshot.take(samples[-1][1], pids, backends))
            finally:
                executors.stop()
            after = None
            if before is not None:
                time.sleep(0.3)  # exiting backends flush their statistics
                after = monitor.pg_counters()
        finally:
            monitor.close()
        seconds = samples[-1][0]
        steady = (
            0.8
            * count
            / max(1e-9, _crossing(samples, 0.9 * count) - _crossing(samples, 0.1 * count))
        )
        result = Throughput(
            backend=backend,
            processes=processes,
            concurrency=concurrency,
            jobs=count,
            seconds=seconds,
            steady_rate=steady,
            verified=verify(db, count),
            first_job_seconds=_crossing(samples, 1),
            cpu=SteadyCpu.between(marks[0], marks[-1]),
        )
        if before is not None and after is not None:
            result.pg = {k: after[k] - before[k] for k in before}
        if probe:
            result.probe = _merge_probes(executors.probes)
        if backend == "postgresql" and db.libpq_url is not None and pgbench and not probe:
            result.pgbench_tps = pgbench_single_row_update_tps(
                db.libpq_url, clients=processes, seconds=PGBENCH_SECONDS
            )
        return result


def _merge_probes(paths: Sequence[Path]) -> dict[str, Any]:
    merged: dict[str, Any] = {
        "statements": {},
        "rows": {},
        "seconds": {},
        "checkouts": 0,
        "commits": 0,
    }
    for path in paths:
        data = json.loads(path.read_text())
        for key in ("statements", "rows", "seconds"):
            for kind, n in data[key].items():
                merged[key][kind] = merged[key].get(kind, 0) + n
        merged["checkouts"] += data["checkouts"]
        merged["commits"] += data["commits"]
    return merged


# -- wake-up latency ---------------------------------------------------------------


@dataclass
class Wakeup:
    backend: str
    poll_interval: float
    latencies_ms: list[float]

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def wakeup_latency(backend: str, admin_url: str, samples: int, workdir: Path) -> Wakeup:
    poll = WAKEUP_POLL_SECONDS_PG if backend == "postgresql" else None
    with (
        fresh_database(backend, admin_url) as db,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock,
    ):
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        executors = start_executors(
            db, 1, WAKEUP_CONCURRENCY, workdir, poll_interval=poll, tag=f"{backend}-wakeup"
        )
        engine = make_engine(db.url)
        rng = random.Random(7)
        latencies: list[float] = []
        try:
            for seq in range(-3, samples):  # three warm-ups: start-up, first import
                committed = _enqueue_wakeup(engine, port, seq)
                started = _wait_start(sock, seq, timeout=60.0, executors=executors)
                if seq >= 0:
                    latencies.append((started - committed) * 1000)
                time.sleep(rng.uniform(0.020, 0.050))
        finally:
            engine.dispose()
            executors.stop()
        return Wakeup(backend, poll if poll is not None else 1.0, latencies)


def _enqueue_wakeup(engine: Engine, port: int, seq: int) -> float:
    with engine.begin() as conn:
        enqueue(conn, WAKEUP.name, args={"port": port, "seq": seq})
    return time.time()  # right after the commit returned


def _wait_start(sock: socket.socket, seq: int, timeout: float, executors: Executors) -> float:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            executors.check_alive()
            raise RuntimeError(f"wake-up job {seq} did not start within {timeout:.0f} s")
        sock.settimeout(min(left, 1.0))
        try:
            data = sock.recv(256)
        except TimeoutError:
            executors.check_alive()
            continue
        got, started = data.decode().split()
        if int(got) == seq:
            return float(started)


# -- report ----------------------------------------------------------------------


def print_throughput(results: Sequence[Throughput]) -> None:
    print()
    print(
        "Throughput: N no-op jobs drained by P `rota executor` processes (clock from process start)"
    )
    header = (
        f"{'backend':<11} {'procs':>5} {'conc':>4} {'jobs':>6} {'seconds':>8} {'jobs/s':>8} "
        f"{'steady jobs/s':>13} {'pgbench tps (same conns)':>24} {'ratio':>6} "
        f"{'steady ratio':>12}  check"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        tps = f"{r.pgbench_tps:,.0f}" if r.pgbench_tps else "-"
        ratio = f"{r.rate / r.pgbench_tps:.2f}" if r.pgbench_tps else "-"
        sratio = f"{r.steady_rate / r.pgbench_tps:.2f}" if r.pgbench_tps else "-"
        print(
            f"{r.backend:<11} {r.processes:>5} {r.concurrency:>4} {r.jobs:>6} "
            f"{r.seconds:>8.2f} {r.rate:>8,.0f} {r.steady_rate:>13,.0f} {tps:>24} "
            f"{ratio:>6} {sratio:>12}  {r.verified}"
        )
    print()
    print(
        "Where the time goes (same runs; CPU seconds per 1,000 jobs between the 10% and 90% marks)"
    )
    header = (
        f"{'backend':<11} {'procs':>5} {'1st job s':>9} {'executors':>9} {'PG backends':>11} "
        f"{'other':>6} {'machine busy':>12} {'xacts/job':>9} {'WAL bytes/job':>13} "
        f"{'WAL flushes/job':>15}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        pg = r.pg or {}
        backends = f"{r.cpu.backends:.3f}" if pg else "-"
        xacts = f"{pg['xacts'] / r.jobs:.3f}" if pg else "-"
        wal = f"{pg['wal_bytes'] / r.jobs:,.0f}" if pg else "-"
        syncs = f"{pg['wal_sync'] / r.jobs:.3f}" if pg else "-"
        print(
            f"{r.backend:<11} {r.processes:>5} {r.first_job_seconds:>9.2f} "
            f"{r.cpu.executors:>9.3f} {backends:>11} {r.cpu.other:>6.3f} "
            f"{r.cpu.busy_share:>11.0%} {xacts:>9} {wal:>13} {syncs:>15}"
        )
    print("(other: everything else on the machine, this script's progress polling included)")


def print_probe(results: Sequence[Throughput]) -> None:
    for r in results:
        if r.probe is None:
            continue
        print()
        print(
            f"Statements per 1,000 jobs, {r.backend}, {r.processes} process(es) "
            f"(bench.executor_probe; {r.rate:,.0f} jobs/s under the probe, {r.verified})"
        )
        per_k = 1000.0 / r.jobs
        print(
            f"  {'statement':<40} {'per 1k jobs':>11} {'rows each':>9} {'mean ms':>8} "
            f"{'ms per job':>10}"
        )
        for kind, n in sorted(r.probe["statements"].items(), key=lambda kv: -kv[1]):
            rows = r.probe["rows"].get(kind, 0)
            seconds = r.probe["seconds"].get(kind, 0.0)
            print(
                f"  {kind[:40]:<40} {n * per_k:>11.1f} {(f'{rows / n:.1f}' if rows else ''):>9} "
                f"{seconds / n * 1000:>8.2f} {seconds / r.jobs * 1000:>10.4f}"
            )
        print(f"  {'pool checkouts':<40} {r.probe['checkouts'] * per_k:>11.1f}")


def print_wakeup(results: Sequence[Wakeup]) -> None:
    print()
    print("Wake-up latency: enqueue commit -> handler start, one idle executor")
    header = (
        f"{'backend':<11} {'poll interval':>13} {'samples':>7} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8}"
    )
    print(header)
    print("-" * len(header))
    for w in results:
        print(
            f"{w.backend:<11} {w.poll_interval:>12g}s {len(w.latencies_ms):>7} "
            f"{w.pct(0.50):>8.1f} {w.pct(0.95):>8.1f} {w.pct(0.99):>8.1f} "
            f"{max(w.latencies_ms):>8.1f}"
        )
    if any(w.backend == "sqlite" for w in results):
        print(
            "(SQLite has no NOTIFY; its executor ran with the default poll interval. Each job "
            "is enqueued 20-50 ms after the previous one started, so a purely polling "
            "executor shows about one poll interval here.)"
        )


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_executor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs per run")
    parser.add_argument("--processes", default="1,2,4", help="executor process counts")
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="--concurrency of each executor process (default 32)",
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="a PostgreSQL server where rota_bench_* databases may be created",
    )
    parser.add_argument(
        "--wakeup-samples",
        type=int,
        default=200,
        help="wake-up samples on PostgreSQL (SQLite: a fifth, at least 20)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="R",
        help="run each throughput case R times, one row each (noisy machines)",
    )
    parser.add_argument(
        "--no-pgbench",
        action="store_true",
        help="skip the pgbench ceiling (quick comparisons only)",
    )
    parser.add_argument("--no-wakeup", action="store_true", help="skip the wake-up latency")
    parser.add_argument(
        "--probe",
        action="store_true",
        help="also run each case under bench.executor_probe (statement counts)",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="DIR",
        help="record py-spy profiles (raw, per thread) of the executors into DIR",
    )
    args = parser.parse_args(argv)
    backends = _csv(args.backends)
    unknown = set(backends) - {"postgresql", "sqlite"}
    if unknown:
        parser.error(f"unknown backend(s): {', '.join(sorted(unknown))}")
    process_counts = [int(p) for p in _csv(args.processes)]

    print(
        f"rota executor benchmark: {args.jobs:,} no-op jobs per run, concurrency "
        f"{args.concurrency} per process, {os.cpu_count()} CPU(s), PostgreSQL at "
        f"{make_url(libpq(args.pg_url)).render_as_string(hide_password=True)}"
    )
    results: list[Throughput] = []
    probes: list[Throughput] = []
    wakeups: list[Wakeup] = []
    with tempfile.TemporaryDirectory(prefix="rota_bench_logs_") as tmp:
        workdir = Path(tmp)
        for backend in backends:
            for p in process_counts * args.repeat:
                r = throughput(
                    backend,
                    args.pg_url,
                    args.jobs,
                    p,
                    args.concurrency,
                    workdir,
                    py_spy_dir=args.py_spy,
                    pgbench=not args.no_pgbench,
                )
                results.append(r)
                ceiling = f", pgbench {r.pgbench_tps:,.0f} tps" if r.pgbench_tps else ""
                print(
                    f"  {backend} x{p}: {r.rate:,.0f} jobs/s (steady {r.steady_rate:,.0f})"
                    f"{ceiling}, {r.verified}",
                    flush=True,
                )
                if args.probe:
                    probes.append(
                        throughput(
                            backend,
                            args.pg_url,
                            args.jobs,
                            p,
                            args.concurrency,
                            workdir,
                            probe=True,
                        )
                    )
        if not args.no_wakeup:
            for backend in backends:
                n = (
                    args.wakeup_samples
                    if backend == "postgresql"
                    else max(20, args.wakeup_samples // 5)
                )
                w = wakeup_latency(backend, args.pg_url, n, workdir)
                wakeups.append(w)
                print(
                    f"  {backend} wake-up: p50 {w.pct(0.5):.1f} ms, p99 {w.pct(0.99):.1f} ms",
                    flush=True,
                )
    print_throughput(results)
    print_probe(probes)
    if wakeups:
        print_wakeup(wakeups)
    failed = [r for r in results + probes if r.verified != "verified"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
