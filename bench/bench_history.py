"""Cost as history grows: every figure on a big history as a ratio to the empty-table one.

PostgreSQL databases holding 0, 1 million and (``--sizes``) 10 million
finished jobs, each with its attempt row: 90% SUCCEEDED, 7% FAILED, 3%
CANCELLED, finished over the last 30 days, half of them scheduled (with
occurrence keys). ``--history`` says how they got there:

* ``grown`` (the default): as a table in use grows. Batches of 20,000 jobs are
  inserted QUEUED, claimed (RUNNING, with their open attempts) and finished
  (the attempts closed), each step one statement writing what rota's own
  statement writes, and vacuumed when autovacuum's default trigger would
  (dead versions over 50 + 20% of the rows). About 140 s per million rows.
* ``loaded``: inserted finished in bulk (``INSERT ... SELECT
  generate_series``), as a restored or repacked table is; 40 s per million.
  Every page keeps a crumb of free space smaller than a finished row, and the
  free space map lists them all: new jobs first fill those crumbs, one per
  page, each page then written whole to the WAL after a checkpoint. A grown
  table's free space is the room claims and outcomes freed, many rows to a
  page.

Both end with ``VACUUM ANALYZE``, one check of the executors' index upkeep
(``rota.executor.reindexer``: the queue's bloated partial indexes rebuilt, as
an idle executor does every hour; ``--no-upkeep`` leaves it out, to measure what
it buys) and a checkpoint. On each size, in
interleaved rounds (one round measures every size in turn, so drift hits all
sizes alike; each round starts with ``ANALYZE`` of the job tables on every
size, as autovacuum would keep them):

* enqueue: ``rota.enqueue_many`` of ``--jobs`` no-op jobs in batches of 1,000,
  median of 5 samples, with the WAL those samples wrote per job and their
  full-page images per 1,000 jobs (``pg_stat_wal``, the server's counters read
  around each sample: nothing else may run on the server). A page changed for
  the first time since a checkpoint is written whole, so jobs spread one to a
  page over old pages' crumbs of free space show up there;
* claim: the jobs of those 5 samples drained by 2 ``rota executor`` processes
  at the defaults (jobs/s from their start, and steady between 10% and 90%);
* scheduler materialisation: one tick making 2,000 occurrences (``every:``
  schedules, a pool nobody serves), occurrences/s, median of 5 ticks;
* idle tick: ``SchedulerService.run_once`` with nothing due, p50 of 100;
* ``rota jobs`` and ``rota schedules``: the command run in-process (no Python
  start-up; connection, schema check, query and output), median of 15;
* what ``rota serve`` reads for ``GET /jobs`` (the first page) and for a
  dashboard refresh, on a pooled connection, median of 15.

Enqueue samples and the last four take from a few ms to half a second: their
samples alternate between the sizes (one on each, then again), so a
checkpoint or autovacuum falls on all alike.

Printed: each figure per size and its ratio to the 0-size figure of the same
round (target >= 0.9; for latencies the ratio is empty / big, so higher is
better too). A later 0 in ``--sizes`` (the default: ``0,0,1000000``) is a
control: a second empty database measured like the others, so its ratios
show how far this machine's noise alone moves a ratio. ``--backlog`` adds
the deep-queue case: the first ``--jobs`` of a 1,000,000-deep QUEUED backlog
drained at the defaults, against a queue just ``--jobs`` deep.

``--cycle 10000000`` adds one vacuum cycle of that history (``vacuum_cycle``):
a million jobs enqueued and drained through rota, in chunks alternating with
an empty database, each vacuumed and analyzed when autovacuum's default
triggers would, against which the rounds' 100,000 jobs right after the
history's last VACUUM are one moment.

Run: ``python -m bench.bench_history [--sizes 0,0,1000000,10000000] [--rounds 3]
[--history grown|loaded] [--keep-history] [--no-upkeep] [--backlog] [--cycle SIZE]``.
10 million rows take a few GB of disk and 25 minutes to grow (7 to load); the databases are dropped
at the end, unless ``--keep-history`` keeps them for the next run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, make_url

from bench.bench_compare import _steady, watch
from bench.bench_enqueue import enqueue_many_rate
from bench.bench_executor import (
    DEFAULT_PG_URL,
    Database,
    SteadyCpu,
    fresh_database,
    libpq,
    pg_database,
    prepare_database,
    start_executors,
)
from rota import migrations
from rota.api.dashboard import dashboard_data
from rota.api.failed_counts import FailedCounts
from rota.api.jobs import DEFAULT_PAGE
from rota.cli.main import main as rota_main
from rota.core.config import JobTypeSpec, ScheduleFile, ScheduleSpec
from rota.core.database import make_engine
from rota.core.queries.jobs_read import JobFilter, newest_jobs
from rota.executor.reindexer import Reindexer
from rota.migrations.runner import head_revision
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.service import SchedulerService

T0 = datetime(2026, 3, 2, tzinfo=UTC)
SCHEDULES = 2000
SCHED_TYPE = JobTypeSpec(name="bench.sched", handler="bench.handlers:noop", pool="nobody")
LOAD_CHUNK = 1_000_000

# ``rota.core.ids.new_job_id`` in SQL, for a row made at ``{at}``: a random lane
# byte, the millisecond modulo 2**24, then a random UUID's bits with version 8.
_JOB_ID_SQL = """overlay(overlay(replace(gen_random_uuid()::text, '-', '')
    placing lpad(to_hex(floor(random() * 256)::int), 2, '0')
         || lpad(to_hex(((extract(epoch FROM {at}) * 1000)::bigint %% 16777216)::int), 6, '0')
    from 1 for 8) placing '8' from 13 for 1)::uuid"""

# Both forms of history: row ``g`` of ``total`` is made at ``s.at``, spread over
# the last 30 days, and every second row is scheduled (its occurrence key).
_HISTORY_AT = "now() - interval '30 days' * (1 - g::float8 / %(total)s) AS at"
_HISTORY_SCHEDULED = """CASE WHEN g %% 2 = 0 THEN 'h' || (g %% 100) || '@' || g END,
           CASE WHEN g %% 2 = 0 THEN 'h' || (g %% 100) END,
           CASE WHEN g %% 2 = 0 THEN s.at END"""

# History rows: finished, half of them scheduled, spread over the last 30 days.
_LOAD_JOBS = (
    """
    INSERT INTO jobs (job_id, job_type, pool, state, attempt_count, max_attempts, run_after,
                      lease_generation, lease_seconds, idempotent, needs_reconcile, args,
                      last_error_code, dedup_key, schedule_name, scheduled_for, started_at,
                      finished_at, created_at, updated_at)
    SELECT """
    + _JOB_ID_SQL.format(at="s.at")
    + """, 'history.job', 'default', s.state, 1, 5,
           s.at, 1, 60, true, false,
           '{"n": 1}'::json, CASE WHEN s.state = 'FAILED' THEN 'BOOM' END,
           """
    + _HISTORY_SCHEDULED
    + """,
           s.at, s.at + interval '1 second', s.at, s.at + interval '1 second'
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g,
    LATERAL (SELECT CASE WHEN g %% 100 < 90 THEN 'SUCCEEDED' WHEN g %% 100 < 97 THEN 'FAILED'
                         ELSE 'CANCELLED' END AS state,
                    """
    + _HISTORY_AT
    + """) AS s
"""
)
_LOAD_ATTEMPTS = """
    INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id, started_at,
                              ended_at, outcome, error_code)
    SELECT job_id, 1, 1, 'history-worker', started_at, finished_at, state, last_error_code
    FROM jobs WHERE job_type = 'history.job' AND created_at >= %(since)s
"""
_LOAD_BACKLOG = (
    """
    INSERT INTO jobs (job_id, job_type, pool, state, attempt_count, max_attempts, run_after,
                      lease_seconds, created_at, updated_at)
    SELECT """
    + _JOB_ID_SQL.format(at="clock_timestamp()")
    + """, 'bench.noop', 'default',
           'QUEUED', 0, 5,
           now() - interval '1 hour' + g * interval '1 millisecond', 60, now(), now()
    FROM generate_series(1, %(n)s) AS g
"""
)


# History grown as a live table grows: each batch is inserted QUEUED (as
# ``enqueue_many`` writes a job), claimed (RUNNING, with its open attempt, as the
# claim writes them) and finished (its outcome, the attempt closed), each step one
# statement; the 90/7/3 split of outcomes is taken from the job id's hash.
_GROW_QUEUE = (
    """
    INSERT INTO jobs (job_id, job_type, pool, priority, state, attempt_count, max_attempts,
                      run_after, lease_generation, lease_seconds, idempotent, needs_reconcile,
                      args, dedup_key, schedule_name, scheduled_for, created_at, updated_at)
    SELECT """
    + _JOB_ID_SQL.format(at="s.at")
    + """, 'history.job', 'default', 0, 'QUEUED',
           0, 5, s.at, 0, 60, true, false, '{"n": 1}'::json,
           """
    + _HISTORY_SCHEDULED
    + """,
           s.at, s.at
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g,
    LATERAL (SELECT """
    + _HISTORY_AT
    + """) AS s
"""
)
_GROW_CLAIM = """
    WITH claimed AS (
        UPDATE jobs AS j
        SET state = 'RUNNING', lease_owner = 'history-worker',
            lease_expires_at = j.created_at + interval '60 seconds',
            lease_generation = j.lease_generation + 1, attempt_count = j.attempt_count + 1,
            started_at = j.created_at, heartbeat_at = j.created_at, updated_at = j.created_at
        WHERE j.job_type = 'history.job' AND j.state = 'QUEUED'
        RETURNING j.job_id, j.attempt_count, j.lease_generation, j.started_at
    )
    INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id, started_at)
    SELECT job_id, attempt_count, lease_generation, 'history-worker', started_at FROM claimed
"""
_GROW_FINISH = """
    WITH done AS (
        UPDATE jobs AS j
        SET state = o.state, lease_owner = NULL, lease_expires_at = NULL,
            last_error_code = CASE WHEN o.state = 'FAILED' THEN 'BOOM' END,
            finished_at = j.started_at + interval '1 second',
            updated_at = j.started_at + interval '1 second'
        FROM (SELECT job_id, CASE WHEN h < 90 THEN 'SUCCEEDED' WHEN h < 97 THEN 'FAILED'
                                  ELSE 'CANCELLED' END AS state
              FROM (SELECT job_id, abs(hashtext(job_id::text)) %% 100 AS h FROM jobs
                    WHERE job_type = 'history.job' AND state = 'RUNNING') AS r) AS o
        WHERE j.job_id = o.job_id
        RETURNING j.job_id, j.lease_generation, j.state, j.last_error_code, j.finished_at
    )
    UPDATE job_attempts AS a
    SET ended_at = done.finished_at, outcome = done.state, error_code = done.last_error_code
    FROM done
    WHERE a.job_id = done.job_id AND a.lease_generation = done.lease_generation
"""
GROW_BATCH = 20_000
# What a history gets after it is made, besides VACUUM ANALYZE (in the fingerprint:
# a kept database made before this was done is not reused).
HISTORY_UPKEEP = "index upkeep check"


def grow_history(libpq_url: str, total: int, upkeep: bool = True) -> float:
    """``total`` jobs taken through queued, running and finished, ``GROW_BATCH`` at a time.

    Vacuumed when autovacuum's default trigger would vacuum (dead row versions
    over 50 + 20% of the table; this bench's server may run with autovacuum
    off), so the free space the claims and outcomes leave is reused as a live
    table reuses it. Returns the seconds the growth took.
    """
    started = time.perf_counter()
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        dead = 0
        for first in range(1, total + 1, GROW_BATCH):
            last = min(total, first + GROW_BATCH - 1)
            conn.execute(_GROW_QUEUE, {"first": first, "last": last, "total": total})
            conn.execute(_GROW_CLAIM, {})
            conn.execute(_GROW_FINISH, {})
            dead += 2 * (last - first + 1)  # the queued and the running version
            if dead > 50 + 0.2 * last:
                on_job_tables(conn, "VACUUM")
                dead = 0
        on_job_tables(conn, "VACUUM ANALYZE")
        if upkeep:
            index_upkeep(libpq_url)
        settle(conn)
    return time.perf_counter() - started


def index_upkeep(libpq_url: str) -> None:
    """One check of the executors' index upkeep (``rota.executor.reindexer``), as an idle
    executor makes it every hour: a table in use has its bloated indexes rebuilt."""
    plain = make_url(libpq_url)
    engine = make_engine(
        plain.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    )
    try:
        done = Reindexer(engine, lambda: True).check_once()
    finally:
        engine.dispose()
    for r in done.rebuilt:
        print(
            f"  index upkeep: {r.name} rebuilt, {r.pages_before:,} -> {r.pages_after:,} "
            f"pages in {r.seconds:.1f} s",
            flush=True,
        )


def load_history(libpq_url: str, total: int, upkeep: bool = True) -> float:
    """``total`` finished jobs and their attempts; returns the seconds the load took."""
    started = time.perf_counter()
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        for first in range(1, total + 1, LOAD_CHUNK):
            last = min(total, first + LOAD_CHUNK - 1)
            with conn.transaction():
                conn.execute(_LOAD_JOBS, {"first": first, "last": last, "total": total})
        since = datetime(1970, 1, 1, tzinfo=UTC)
        conn.execute(_LOAD_ATTEMPTS, {"since": since})
        on_job_tables(conn, "VACUUM ANALYZE")
        if upkeep:
            index_upkeep(libpq_url)
        settle(conn)
    return time.perf_counter() - started


def on_job_tables(conn: psycopg.Connection[Any], command: str) -> None:
    """``command`` (VACUUM, ANALYZE, VACUUM ANALYZE) on ``jobs`` and ``job_attempts``."""
    for table in ("jobs", "job_attempts"):
        conn.execute(f"{command} {table}")


def settle(conn: psycopg.Connection[Any]) -> None:
    """Write the load's dirty pages out now, not during the first measured round.

    An aged table is not in the middle of a checkpoint of 3 GB it was just
    loaded with: without this, the first round after a 10-million-row load
    measured the checkpointer (enqueue at 0.41 x, then 1.24 x and 0.95 x).
    """
    try:
        conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        print("  (no CHECKPOINT: not a superuser; the first round may be slower)", flush=True)


@dataclass
class Figures:
    enqueue: float = 0.0  # jobs/s
    enqueue_wal: float = 0.0  # WAL bytes per job enqueued, over the round's samples
    enqueue_fpi: float = 0.0  # full-page images per 1,000 jobs enqueued
    claim: float = 0.0  # jobs/s from the executors' start
    claim_steady: float = 0.0
    materialise: float = 0.0  # occurrences/s
    idle_tick_ms: float = 0.0
    jobs_ms: float = 0.0
    schedules_ms: float = 0.0
    page_ms: float = 0.0
    dashboard_ms: float = 0.0


@dataclass
class Sized:
    size: int
    db: Database
    minute: int = 0  # the scheduler ticks' clock, one minute per tick
    rounds: list[Figures] = field(default_factory=list)
    control: bool = False  # a second empty database: its ratios are the machine's noise

    @property
    def label(self) -> str:
        return "0 rows (control)" if self.control else f"{self.size:,} rows"


def _unfinished_noop(conn: psycopg.Connection[tuple[int]]) -> int:
    # Waiting and leased jobs counted apart, each in its own partial index (no
    # index holds both since migration 0018): one count of the four states read
    # the whole table, 40 times a second, and took its CPU from the drain.
    row = conn.execute(
        "SELECT (SELECT count(*) FROM jobs WHERE state IN ('QUEUED', 'RETRY_WAIT')"
        " AND job_type = 'bench.noop')"
        " + (SELECT count(*) FROM jobs WHERE state IN ('RUNNING', 'CANCEL_REQUESTED')"
        " AND job_type = 'bench.noop')"
    ).fetchone()
    assert row is not None
    return int(row[0])


def drain(db: Database, count: int, workdir: Path, tag: str) -> tuple[float, float]:
    """(jobs/s from start, steady jobs/s): ``count`` queued no-op jobs, 2 default executors."""
    rate, steady, _ = drain_cpu(db, count, workdir, tag)
    return rate, steady


def drain_cpu(db: Database, count: int, workdir: Path, tag: str) -> tuple[float, float, SteadyCpu]:
    """``drain``, and the CPU it took per 1,000 jobs between its 10% and 90% marks."""
    assert db.libpq_url is not None
    with psycopg.connect(db.libpq_url, autocommit=True) as conn:
        waiting = _unfinished_noop(conn)
        return _watched_drain(
            conn, db, count, workdir, tag, lambda: waiting - _unfinished_noop(conn)
        )


def _watched_drain(
    conn: psycopg.Connection[Any],
    db: Database,
    count: int,
    workdir: Path,
    tag: str,
    done: Callable[[], int],
) -> tuple[float, float, SteadyCpu]:
    """Start 2 default executors and watch ``done()`` reach ``count``: (jobs/s, steady jobs/s,
    CPU per 1,000 jobs)."""

    def backends() -> list[int]:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        return [int(r[0]) for r in rows]

    started = time.perf_counter()
    executors = start_executors(db, 2, None, workdir, tag=tag)
    try:
        samples, marks = watch(
            started,
            count,
            done,
            [p.pid for p in executors.procs],
            backends,
            executors.check_alive,
        )
    finally:
        executors.stop()
    return count / samples[-1][0], _steady(samples, count), SteadyCpu.between(*marks)


def apply_schedules(db: Database) -> None:
    specs = {
        f"s{i:05d}": ScheduleSpec(
            name=f"s{i:05d}", job_type=SCHED_TYPE.name, every=timedelta(minutes=1)
        )
        for i in range(SCHEDULES)
    }
    engine = make_engine(db.url)
    try:
        apply_schedule_file(
            engine, ScheduleFile("bench.yaml", {SCHED_TYPE.name: SCHED_TYPE}, specs), now=T0
        )
    finally:
        engine.dispose()


def materialise_rates(sized: Sequence[Sized], ticks: int = 5) -> list[float]:
    """Occurrences/s of a full tick (2,000 due) for each size: median of ``ticks``.

    A tick takes about 0.15 s: its samples alternate between the sizes, as the
    latencies' do, so a checkpoint beside one size's ticks falls on all alike.
    Each database's first tick compiles every rule and is not counted.
    """
    engines = [make_engine(s.db.url) for s in sized]
    try:
        services = [SchedulerService(e) for e in engines]
        rates: list[list[float]] = [[] for _ in sized]
        for n in range(ticks + 1):
            for i, (s, service) in enumerate(zip(sized, services, strict=True)):
                s.minute += 1
                started = time.perf_counter()
                result = service.run_once(T0 + timedelta(minutes=s.minute, seconds=1))
                elapsed = time.perf_counter() - started
                if result.created != SCHEDULES:
                    raise RuntimeError(f"a tick made {result.created} of {SCHEDULES} occurrences")
                if n or s.minute > 1:
                    rates[i].append(result.created / elapsed)
        return [statistics.median(r[-ticks:]) for r in rates]
    finally:
        for e in engines:
            e.dispose()


def analyze(db: Database) -> None:
    """Fresh statistics on the job tables, as autovacuum keeps them.

    This bench's server may run with autovacuum off. Without this, the empty
    table kept the statistics of its creation (no rows) while the last
    round's jobs piled up in it, and ``rota jobs`` took 139 ms there
    instead of 56 ms: the history sizes looked twice as fast as the base.
    """
    assert db.libpq_url is not None
    with psycopg.connect(db.libpq_url, autocommit=True) as conn:
        on_job_tables(conn, "ANALYZE")


def latencies(sized: Sequence[Sized]) -> list[tuple[float, ...]]:
    """(idle tick p50, ``rota jobs``, ``rota schedules``, API page, dashboard) in ms, per size.

    These take a millisecond or a few dozen: a checkpoint or an autovacuum
    beside one size's burst of samples would decide its figure. So every
    sample is taken for each size in turn (tick on 0 rows, on 1M, on 10M, then
    again), and a disturbance falls on all sizes alike.
    """
    engines = [make_engine(s.db.url) for s in sized]
    try:
        services = [SchedulerService(e) for e in engines]
        quiet = [T0 + timedelta(minutes=s.minute, seconds=2) for s in sized]
        for service, at in zip(services, quiet, strict=True):
            service.run_once(at)  # warm
        ticks: list[list[float]] = [[] for _ in sized]
        for _ in range(100):
            for i, (service, at) in enumerate(zip(services, quiet, strict=True)):
                started = time.perf_counter()
                service.run_once(at)
                ticks[i].append(time.perf_counter() - started)
        pages, boards = served_ms(engines)
    finally:
        for e in engines:
            e.dispose()
    jobs: list[list[float]] = [[] for _ in sized]
    schedules: list[list[float]] = [[] for _ in sized]
    for s in sized:  # warm the imports and each database's first connection
        command_ms(["jobs", "--db", s.db.url])
        command_ms(["schedules", "--db", s.db.url])
    for _ in range(15):
        for i, s in enumerate(sized):
            jobs[i].append(command_ms(["jobs", "--db", s.db.url]))
            schedules[i].append(command_ms(["schedules", "--db", s.db.url]))
    return [
        (statistics.median(t) * 1000, statistics.median(j), statistics.median(c), p, b)
        for t, j, c, p, b in zip(ticks, jobs, schedules, pages, boards, strict=True)
    ]


def served_ms(engines: Sequence[Engine]) -> tuple[list[float], list[float]]:
    """What ``rota serve`` reads per request, in ms, median of 15 each, per engine.

    ``GET /jobs``'s first page (``newest_jobs``, 50 rows and one more) and the
    dashboard's refresh (``dashboard_data``: counts, gauges, charts, the last
    failures), on a pooled connection: the HTTP layer costs the same on every
    size, so it is left out of the ratio. A new ``FailedCounts`` for every
    refresh: each one counts all the FAILED jobs, as a served app's refresh
    does whenever its kept count is due (``rota.api.failed_counts``): the
    refresh's own cost, not the share the kept count saves.
    """
    samples: list[tuple[list[float], list[float]]] = [([], []) for _ in engines]
    for sample in range(16):  # the first is a warm-up
        for engine, (pages, boards) in zip(engines, samples, strict=True):
            with engine.connect() as conn:
                started = time.perf_counter()
                page = newest_jobs(conn, JobFilter(), limit=DEFAULT_PAGE + 1)
                paged = time.perf_counter()
                dashboard_data(conn, FailedCounts())
                done = time.perf_counter()
            if not page:
                raise RuntimeError("GET /jobs read no job: the bench made none")
            if sample:
                pages.append((paged - started) * 1000)
                boards.append((done - paged) * 1000)
    return (
        [statistics.median(p) for p, _ in samples],
        [statistics.median(b) for _, b in samples],
    )


def command_ms(argv: list[str]) -> float:
    """One run of a ``rota`` command in-process, in ms."""
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = rota_main(argv)
    elapsed = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"rota {' '.join(argv[:1])} exited {code}")
    return elapsed * 1000


# 5, not 3: two empty databases' ratio ranged 0.85-1.09 over a day's runs
# with 3 (the 10M enqueue read 0.88 once, 0.97 and 1.05 in the other runs).
ENQUEUE_SAMPLES = 5


def sampled_jobs(count: int) -> int:
    """The jobs ``ENQUEUE_SAMPLES`` samples of ``count`` leave: each has a warm-up job too."""
    return ENQUEUE_SAMPLES * (count + 1)


def enqueue_rates(sized: Sequence[Sized], count: int) -> list[Figures]:
    """``enqueue_many`` jobs/s of ``count`` jobs for each size: median of ``ENQUEUE_SAMPLES``.

    A sample takes half a second on a 2-core machine, and consecutive samples
    on one database differed by up to 30%: the samples alternate between the
    sizes, as the latencies' do. With each size's rate, the WAL its samples
    wrote (``pg_stat_wal``, the server's counters read around each sample, so
    nothing else may run on the server): bytes per job and full-page images
    per 1,000 jobs. A page's first change after a checkpoint writes all of it,
    so jobs spread over many old pages cost many images.
    """
    rates: list[list[float]] = [[] for _ in sized]
    wal = [(0, 0) for _ in sized]
    for _ in range(ENQUEUE_SAMPLES):
        for i, s in enumerate(sized):
            before = wal_counters(s.db)
            rates[i].append(enqueue_many_rate(s.db.url, count, 1000))
            wal[i] = _added(wal[i], wal_since(s.db, before))
    jobs = sampled_jobs(count)
    return [
        Figures(
            enqueue=statistics.median(r), enqueue_wal=w[0] / jobs, enqueue_fpi=1000 * w[1] / jobs
        )
        for r, w in zip(rates, wal, strict=True)
    ]


def _stat_row(db: Database, sql: str) -> tuple[Any, ...]:
    """The one row a statistics query returns, over a connection of its own."""
    assert db.libpq_url is not None
    with psycopg.connect(db.libpq_url) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return tuple(row)


def wal_counters(db: Database) -> tuple[int, int]:
    """The server's WAL bytes and full-page images written so far (PostgreSQL 14+)."""
    row = _stat_row(db, "SELECT wal_bytes::bigint, wal_fpi FROM pg_stat_wal")
    return int(row[0]), int(row[1])


def wal_since(db: Database, before: tuple[int, int]) -> tuple[int, int]:
    """WAL bytes and full-page images written since ``wal_counters`` read ``before``."""
    after = wal_counters(db)
    return after[0] - before[0], after[1] - before[1]


def claim_index_blocks(db: Database) -> int:
    """Blocks of ``ix_jobs_claimable`` read so far (hits and reads, as the server counts)."""
    row = _stat_row(
        db,
        "SELECT idx_blks_hit + idx_blks_read FROM pg_statio_user_indexes "
        "WHERE indexrelname = 'ix_jobs_claimable'",
    )
    return int(row[0])


def attempt_updates(db: Database) -> tuple[int, int]:
    """(updates of ``job_attempts`` rows so far, of them on their own page (HOT)): an
    attempt is updated once, when it is closed."""
    row = _stat_row(
        db,
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'job_attempts'",
    )
    return int(row[0]), int(row[1])


def io_ms(db: Database) -> tuple[float, float]:
    """(ms this database's backends spent reading and writing data blocks, ms the server
    spent writing and syncing WAL) so far: zero unless ``track_io_timing`` and
    ``track_wal_io_timing`` are on."""
    row = _stat_row(
        db,
        "SELECT d.blk_read_time + d.blk_write_time, w.wal_write_time + w.wal_sync_time "
        "FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()",
    )
    return float(row[0]), float(row[1])


def _added(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


HISTORY_FORMS: dict[str, Callable[[str, int, bool], float]] = {
    "grown": grow_history,
    "loaded": load_history,
}


@contextmanager
def sized_database(
    admin_url: str, size: int, form: str, keep: bool = False, upkeep: bool = True
) -> Iterator[Sized]:
    template = kept_history(admin_url, size, form, upkeep) if keep and size else None
    with fresh_database("postgresql", admin_url, template) as db:
        assert db.libpq_url is not None
        if size and template is None:
            seconds = HISTORY_FORMS[form](db.libpq_url, size, upkeep)
            print(
                f"  {form} {size:,} finished jobs and their attempts in {seconds:.0f} s", flush=True
            )
        apply_schedules(db)
        yield Sized(size, db)


def kept_history(admin_url: str, size: int, form: str, upkeep: bool = True) -> str:
    """The name of a database kept between runs holding this history; made if missing.

    Named by form, size, schema revision and ``history_fingerprint()``, so
    neither a migration changed in place nor a changed way of making history
    meets an old copy. Each run measures a file copy of it (``CREATE DATABASE ...
    TEMPLATE``): the same pages and free space map, without growing 10 million
    rows again (25 minutes).
    """
    name = f"rota_bench_hist_{form}_{size}_{head_revision()}_{history_fingerprint(upkeep)}"
    admin = libpq(admin_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            print(f"  {form} {size:,} finished jobs: copying the kept database {name}", flush=True)
            return name
        conn.execute(f'CREATE DATABASE "{name}"')
    db = pg_database(admin_url, name)
    assert db.libpq_url is not None
    try:
        prepare_database(db)
        seconds = HISTORY_FORMS[form](db.libpq_url, size, upkeep)
    except BaseException:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        raise
    print(
        f"  {form} {size:,} finished jobs and their attempts in {seconds:.0f} s, kept as "
        f"{name} (DROP DATABASE it when done)",
        flush=True,
    )
    return name


def history_fingerprint(upkeep: bool = True) -> str:
    """8 hex digits of the migrations' source and of the SQL that makes history.

    An unreleased migration may change in place (0010 did, twice): its
    revision stays, the schema it makes does not.
    """
    digest = hashlib.sha256()
    for path in sorted((Path(migrations.__file__).parent / "versions").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for sql in (_LOAD_JOBS, _LOAD_ATTEMPTS, _GROW_QUEUE, _GROW_CLAIM, _GROW_FINISH):
        digest.update(sql.encode())
    if upkeep:
        digest.update(HISTORY_UPKEEP.encode())
    return digest.hexdigest()[:8]


# (name, figure, higher is better, unit); None: printed beside a figure, no ratio taken.
RATIOS: list[tuple[str, Callable[[Figures], float], bool | None, str]] = [
    ("enqueue_many", lambda f: f.enqueue, True, "jobs/s"),
    ("  WAL it wrote", lambda f: f.enqueue_wal, None, "B/job"),
    ("  full-page images in it", lambda f: f.enqueue_fpi, None, "per 1,000 jobs"),
    ("claim (2 executors, defaults)", lambda f: f.claim, True, "jobs/s"),
    ("  steady", lambda f: f.claim_steady, True, "jobs/s"),
    ("materialisation, 2,000 due", lambda f: f.materialise, True, "occ/s"),
    ("idle tick p50", lambda f: f.idle_tick_ms, False, "ms"),
    ("rota jobs", lambda f: f.jobs_ms, False, "ms"),
    ("rota schedules (2,000)", lambda f: f.schedules_ms, False, "ms"),
    ("GET /jobs, first page (query)", lambda f: f.page_ms, False, "ms"),
    ("dashboard refresh (queries)", lambda f: f.dashboard_ms, False, "ms"),
]


def report(sized: Sequence[Sized]) -> None:
    base = sized[0]
    print(
        "\nHistory size: each figure, and its ratio to the same round's empty-table figure "
        "(median over rounds; target >= 0.9)"
    )
    header = f"  {'figure':<32}" + "".join(f"{s.label:>19}" for s in sized)
    print(header)
    for name, pick, higher_better, unit in RATIOS:
        cells = []
        for s in sized:
            values = [pick(f) for f in s.rounds]
            pairs = [
                (pick(f), pick(b)) if higher_better else (pick(b), pick(f))
                for f, b in zip(s.rounds, base.rounds, strict=True)
            ]
            ratios = [top / bottom for top, bottom in pairs if bottom]
            digits = 0 if unit in ("jobs/s", "occ/s", "B/job") else 1
            shown = f"{statistics.median(values):,.{digits}f}"
            ratio = f"{statistics.median(ratios):.2f}" if len(ratios) == len(pairs) else "-"
            cell = shown if s is base or higher_better is None else f"{shown} ({ratio})"
            cells.append(f"{cell:>19}")
        print(f"  {name:<32}" + "".join(cells) + f"  {unit}")


def backlog(admin_url: str, count: int, deep: int, workdir: Path, rounds: int) -> None:
    print(
        f"\nDeep queue: the first {count:,} jobs of a {deep:,}-deep QUEUED backlog, "
        f"against a {count:,}-deep queue (2 executors, defaults)"
    )
    with (
        fresh_database("postgresql", admin_url) as big,
        fresh_database("postgresql", admin_url) as small,
    ):
        for db, n in ((big, deep), (small, count)):
            assert db.libpq_url is not None
            with psycopg.connect(db.libpq_url, autocommit=True) as conn:
                conn.execute(_LOAD_BACKLOG, {"n": n})
                conn.execute("VACUUM ANALYZE jobs")
                settle(conn)
        os.sync()  # the checkpoint's writes reach the disk before the first drain, not during
        ratios = []
        for r in range(rounds):
            rates = {}
            for name, db in (
                (("shallow", small), ("deep", big))
                if r % 2 == 0
                else (("deep", big), ("shallow", small))
            ):
                assert db.libpq_url is not None
                if name == "shallow" and r:
                    with psycopg.connect(db.libpq_url, autocommit=True) as conn:
                        conn.execute(_LOAD_BACKLOG, {"n": count})
                rates[name] = _drain_first(db, count, workdir, f"backlog-{name}-{r}")
            ratios.append(rates["deep"][1] / rates["shallow"][1])
            print(
                f"  round {r + 1}: shallow {rates['shallow'][0]:,.0f} jobs/s (steady "
                f"{rates['shallow'][1]:,.0f}), deep {rates['deep'][0]:,.0f} (steady "
                f"{rates['deep'][1]:,.0f}): deep / shallow {ratios[-1]:.2f} (steady)",
                flush=True,
            )
        print(f"  median deep / shallow: {statistics.median(ratios):.2f} (target >= 0.9)")


@dataclass
class Cycle:
    """One database's part of ``vacuum_cycle``."""

    label: str
    db: Database
    rows: int  # jobs in the table
    enqueue_s: float = 0.0
    drain_s: float = 0.0
    wal: tuple[int, int] = (0, 0)  # WAL bytes, full-page images
    backend_cpu: float = 0.0  # CPU seconds of the executors' backends (10-90% of each drain)
    dead: int = 0  # row versions made dead since the last VACUUM
    changed: int = 0  # rows changed since the last ANALYZE
    vacuums: int = 0
    analyzes: int = 0
    closed: int = 0  # attempt rows closed (updated) while draining
    in_place: int = 0  # of them on their own page (HOT)

    def autovacuum(self) -> None:
        """VACUUM and ANALYZE when autovacuum's default triggers would (dead versions over
        50 + 20% of the rows; rows changed over 50 + 10%): this bench's server may run
        without it, and a table never analyzed plans its claims blind."""
        analyze = self.changed > 50 + 0.1 * self.rows
        vacuum = self.dead > 50 + 0.2 * self.rows
        if not (analyze or vacuum):
            return
        assert self.db.libpq_url is not None
        with psycopg.connect(self.db.libpq_url, autocommit=True) as conn:
            if analyze:
                on_job_tables(conn, "ANALYZE")
                self.changed, self.analyzes = 0, self.analyzes + 1
            if vacuum:
                on_job_tables(conn, "VACUUM")
                self.dead, self.vacuums = 0, self.vacuums + 1


CYCLE_CHUNK = 100_000


def vacuum_cycle(
    admin_url: str,
    size: int,
    total: int,
    workdir: Path,
    form: str = "grown",
    keep: bool = False,
    upkeep: bool = True,
) -> None:
    """``total`` jobs through rota (``enqueue_many``, then 2 executors at the defaults), in
    chunks of ``CYCLE_CHUNK`` alternating between an empty database and one holding
    ``size`` finished jobs, each vacuumed and analyzed as autovacuum would.

    The history rounds measure 100,000 jobs right after the history's last
    VACUUM. A table in use is somewhere in a vacuum cycle: at 10 million rows
    autovacuum comes by once per million jobs (two dead versions each), an
    empty table's every few chunks. This is one such cycle of the big table.
    """
    print(
        f"\nOne vacuum cycle: {total:,} jobs enqueued and drained in chunks of "
        f"{CYCLE_CHUNK:,}, an empty database against {size:,} finished jobs, each "
        f"vacuumed and analyzed when autovacuum's default triggers would",
        flush=True,
    )
    with (
        fresh_database("postgresql", admin_url) as small,
        sized_database(admin_url, size, form, keep, upkeep) as big,
    ):
        cycles = [Cycle("0 rows", small, 0), Cycle(big.label, big.db, size)]
        os.sync()
        for i in range(0, total, CYCLE_CHUNK):
            n = min(CYCLE_CHUNK, total - i)
            for c in cycles:
                before = wal_counters(c.db)
                started = time.perf_counter()
                for _ in range(ENQUEUE_SAMPLES):
                    enqueue_many_rate(c.db.url, n // ENQUEUE_SAMPLES, 1000)
                enqueued = time.perf_counter()
                blocks = claim_index_blocks(c.db)
                io_before = io_ms(c.db)
                closings = attempt_updates(c.db)
                _, steady, cpu = drain_cpu(
                    c.db, sampled_jobs(n // ENQUEUE_SAMPLES), workdir, f"cycle-{c.rows}-{i}"
                )
                drained = time.perf_counter()
                c.backend_cpu += cpu.backends * n / 1000
                blocks = claim_index_blocks(c.db) - blocks
                io = [a - b for a, b in zip(io_ms(c.db), io_before, strict=True)]
                closed, in_place = (
                    a - b for a, b in zip(attempt_updates(c.db), closings, strict=True)
                )
                c.closed, c.in_place = c.closed + closed, c.in_place + in_place
                written = wal_since(c.db, before)
                c.enqueue_s += enqueued - started
                c.drain_s += drained - enqueued
                c.wal = _added(c.wal, written)
                c.rows += n
                c.dead += 2 * n  # the queued and the running version
                c.changed += 3 * n  # inserted, claimed, finished
                c.autovacuum()
                print(
                    f"  chunk {i // CYCLE_CHUNK + 1}, {c.label}: enqueue "
                    f"{n / (enqueued - started):,.0f}/s, "
                    f"drain {n / (drained - enqueued):,.0f}/s (steady {steady:,.0f}), "
                    f"{written[0] / n:,.0f} B of WAL a job, "
                    f"{1000 * written[1] / n:.1f} full pages per 1,000, "
                    f"{blocks / n:.1f} claim-index blocks a job, "
                    f"{100 * in_place / max(1, closed):.0f}% of attempts closed in place, "
                    f"{cpu.backends * 1000:.0f} ms of backend CPU per 1,000 (executors "
                    f"{cpu.executors * 1000:.0f}, the rest of the machine "
                    f"{cpu.other * 1000:.0f}); draining, "
                    f"{io[0] / 1000:.1f} s of block I/O, {io[1] / 1000:.1f} s of WAL I/O",
                    flush=True,
                )
        for c in cycles:
            print(
                f"  {c.label}: enqueue {total / c.enqueue_s:,.0f}/s, drain "
                f"{total / c.drain_s:,.0f}/s, {c.wal[0] / total:,.0f} B of WAL a job, "
                f"{1000 * c.wal[1] / total:.1f} full pages per 1,000, "
                f"{c.backend_cpu * 1e6 / total:.0f} ms of backend CPU per 1,000, "
                f"{100 * c.in_place / max(1, c.closed):.0f}% of attempts closed in place; "
                f"{c.vacuums} VACUUM, "
                f"{c.analyzes} ANALYZE"
            )
        base, other = cycles
        print(
            f"  over the cycle, {other.label} / empty: enqueue "
            f"{base.enqueue_s / other.enqueue_s:.2f}, drain {base.drain_s / other.drain_s:.2f} "
            f"(target >= 0.9); backend CPU per job "
            f"{other.backend_cpu / max(1e-9, base.backend_cpu):.2f} x the empty table's",
            flush=True,
        )


def _drain_first(db: Database, count: int, workdir: Path, tag: str) -> tuple[float, float]:
    assert db.libpq_url is not None
    with psycopg.connect(db.libpq_url, autocommit=True) as conn:

        def succeeded() -> int:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') "
                "AND state = 'SUCCEEDED'"
            ).fetchone()
            assert row is not None
            return int(row[0])

        before = succeeded()
        rate, steady, _ = _watched_drain(
            conn, db, count, workdir, tag, lambda: succeeded() - before
        )
        return rate, steady


def run(
    admin_url: str,
    sizes: Sequence[int],
    rounds: int,
    count: int,
    form: str = "grown",
    keep: bool = False,
    upkeep: bool = True,
) -> list[Sized]:
    with (
        tempfile.TemporaryDirectory(prefix="rota_bench_hist_") as tmp,
        contextlib.ExitStack() as stack,
    ):
        workdir = Path(tmp)
        sized = []
        for size in sizes:
            print(f"  preparing a database with {size:,} finished jobs", flush=True)
            sized.append(stack.enter_context(sized_database(admin_url, size, form, keep, upkeep)))
            sized[-1].control = len(sized) > 1 and size == 0
        # Copying a kept 10-million-row database leaves 7 GB for the kernel to write
        # back: the first round's fsyncs waited behind it (one drain at 0.4 x).
        os.sync()
        for r in range(rounds):
            order = sized if r % 2 == 0 else list(reversed(sized))
            for s in sized:
                analyze(s.db)
            for s, enqueued in zip(order, enqueue_rates(order, count), strict=True):
                s.rounds.append(enqueued)
            for s in order:  # every job just enqueued, and each sample's warm-up job
                f = s.rounds[-1]
                f.claim, f.claim_steady = drain(
                    s.db, sampled_jobs(count), workdir, f"hist-{s.size}-{r}"
                )
            for s, rate in zip(sized, materialise_rates(sized), strict=True):
                s.rounds[-1].materialise = rate
            for s, figures in zip(sized, latencies(sized), strict=True):
                f = s.rounds[-1]
                f.idle_tick_ms, f.jobs_ms, f.schedules_ms, f.page_ms, f.dashboard_ms = figures
                print(
                    f"  round {r + 1}, {s.label}: enqueue {f.enqueue:,.0f}/s ({f.enqueue_wal:,.0f} "
                    f"B of WAL a job, {f.enqueue_fpi:.1f} full pages per 1,000), claim "
                    f"{f.claim:,.0f}/s (steady {f.claim_steady:,.0f}), materialise "
                    f"{f.materialise:,.0f}/s, idle tick {f.idle_tick_ms:.2f} ms, rota jobs "
                    f"{f.jobs_ms:.1f} ms, rota schedules {f.schedules_ms:.1f} ms, GET /jobs "
                    f"{f.page_ms:.1f} ms, dashboard {f.dashboard_ms:.1f} ms",
                    flush=True,
                )
        report(sized)
        return sized


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_history",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        default="0,0,1000000",
        help="finished jobs in each database; the first is the base (0), a "
        "later 0 is a control (a second empty database)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--jobs",
        type=int,
        default=20_000,
        help=f"jobs per enqueue sample ({ENQUEUE_SAMPLES} a round, all drained)",
    )
    parser.add_argument(
        "--history",
        choices=sorted(HISTORY_FORMS),
        default="grown",
        help="grown: each job inserted queued, claimed and finished, vacuumed as autovacuum "
        "would (a table in use); loaded: inserted finished in bulk (fast; a restored "
        "table, whose pages' leftover crumbs new rows harvest first)",
    )
    parser.add_argument(
        "--keep-history",
        action="store_true",
        help="keep each history database (rota_bench_hist_*) and measure a copy of it; a "
        "later run with this flag copies it instead of growing it again",
    )
    parser.add_argument(
        "--no-upkeep",
        action="store_true",
        help="leave out the index upkeep check at the end of a history (what the "
        "executors' rebuild of bloated indexes buys, measured against the default)",
    )
    parser.add_argument("--backlog", action="store_true", help="the 1M-deep queue case too")
    parser.add_argument("--backlog-depth", type=int, default=1_000_000)
    parser.add_argument(
        "--backlog-rounds",
        type=int,
        default=5,
        help="deep and shallow drains, alternating (a round takes about 15 s; one of 3 "
        "rounds at 0.77 decided a median)",
    )
    parser.add_argument(
        "--cycle",
        type=int,
        default=0,
        metavar="SIZE",
        help="also one vacuum cycle of a SIZE-row history (10000000: a million jobs through "
        "rota against an empty database, each vacuumed as autovacuum would; 5 minutes)",
    )
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if not sizes or sizes[0] != 0:
        parser.error("--sizes must start with 0, the base every ratio is taken against")
    print(
        f"History size on PostgreSQL: sizes {', '.join(f'{s:,}' for s in sizes)}, "
        f"{args.rounds} round(s), {ENQUEUE_SAMPLES} enqueue samples of {args.jobs:,} jobs "
        f"a round (all drained), history {args.history}"
        f"{' without index upkeep' if args.no_upkeep else ''}"
    )
    run(
        args.pg_url,
        sizes,
        args.rounds,
        args.jobs,
        args.history,
        args.keep_history,
        not args.no_upkeep,
    )
    if args.cycle:
        with tempfile.TemporaryDirectory(prefix="rota_bench_cycle_") as tmp:
            vacuum_cycle(
                args.pg_url,
                args.cycle,
                max(CYCLE_CHUNK, args.cycle // 10),
                Path(tmp),
                args.history,
                args.keep_history,
                not args.no_upkeep,
            )
    if args.backlog:
        with tempfile.TemporaryDirectory(prefix="rota_bench_backlog_") as tmp:
            backlog(args.pg_url, args.jobs, args.backlog_depth, Path(tmp), args.backlog_rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
