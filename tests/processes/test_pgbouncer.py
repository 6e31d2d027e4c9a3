"""rota through a real PgBouncer in ``pool_mode = transaction``, the URL the only change.

A PgBouncer (Debian's ``pgbouncer``, started here on a free port, ``default_pool_size
= 8``) stands in front of a fresh database of the test server:

* an engine through it sees the pooler and prepares nothing on the server; a
  direct engine keeps psycopg's prepared statements; statements repeated on two
  pooled connections at once never clash;
* ``rota migrate``, ``apply``, 2 schedulers (an ``every: 1s`` schedule), executors
  (12; ``ROTA_TEST_PGBOUNCER_EXECUTORS`` lowers it, never below 4), ``serve``,
  ``enqueue`` through the producer API and ``POST /jobs``, and the listing commands
  all run through it for about 20 s: every job runs once, the per-second
  occurrences have no gap and no duplicate, no process logs an ERROR or WARNING
  line, and PgBouncer's ``SHOW POOLS`` never shows more server connections than the
  pool holds;
* wake-ups: with ``ROTA_LISTEN_URL`` (direct) a job enqueued through the pooler at
  idle starts within 100 ms (p95); without it the executor says once that
  notifications do not arrive, naming ROTA_LISTEN_URL, and a job starts within 1.5 s
  (a lone executor, polling every tenth of a second then: 0.3 s).

Where the ``pgbouncer`` binary is absent these tests skip, saying so (CI installs
it); a PgBouncer that is there but does not start fails them.
"""

from __future__ import annotations

import calendar
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.engine import make_url

from bench.pgbouncer import PgBouncer, PgBouncerAbsent, free_port
from bench.pgbouncer import start_pgbouncer as start_bouncer
from rota.core.database import behind_pooler, make_engine
from rota.core.tables import job_attempts, jobs
from rota.executor.reindexer import Reindexer
from rota.producer.enqueue import JobRequest, enqueue, enqueue_many
from tests.support.executor_support import REPO_ROOT, subprocess_env, wait_for

pytestmark = pytest.mark.slow

POOL_SIZE = 8
RUN_SECONDS = 20.0
EXECUTORS = max(4, int(os.environ.get("ROTA_TEST_PGBOUNCER_EXECUTORS", "12")))
_BAD_LINE = re.compile(r"\b(ERROR|WARNING|CRITICAL)\b|Traceback")

# Advisory locks held in this test's database: the server may serve other tests' too.
_ADVISORY_LOCKS_HERE = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def start_pgbouncer(tmp_path: Path, server_url: str) -> PgBouncer:
    try:
        return start_bouncer(tmp_path, server_url, POOL_SIZE)
    except PgBouncerAbsent as absent:
        pytest.skip(f"{absent}; CI installs it")


@dataclass
class Pooled:
    direct_url: str
    url: str
    dbname: str
    bouncer: PgBouncer


@pytest.fixture
def pooled(empty_pg_url: str, tmp_path: Path) -> Iterator[Pooled]:
    """A fresh empty database and a PgBouncer (transaction mode) in front of it."""
    bouncer = start_pgbouncer(tmp_path, empty_pg_url)
    try:
        dbname = str(make_url(empty_pg_url).database)
        yield Pooled(empty_pg_url, bouncer.url(empty_pg_url), dbname, bouncer)
    finally:
        bouncer.process.terminate()
        bouncer.process.wait(10)


def rota(*argv: str, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *argv],
        env=subprocess_env(url, **env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bad_lines(text_: str) -> list[str]:
    return [line for line in text_.splitlines() if _BAD_LINE.search(line)]


def migrated(pooled: Pooled, tmp_path: Path) -> None:
    """``rota migrate`` and ``rota apply`` through the pooler."""
    done = rota("migrate", url=pooled.url)
    assert done.returncode == 0, done.stderr
    assert not bad_lines(done.stdout + done.stderr)
    schedule_file = tmp_path / "schedules.yaml"
    schedule_file.write_text(
        "job_types:\n"
        "  noop:\n    handler: tests.handlers.plain:noop\n"
        "schedules:\n"
        "  tick:\n    job_type: noop\n    every: 1s\n"
    )
    done = rota("apply", str(schedule_file), url=pooled.url)
    assert done.returncode == 0, done.stderr
    assert not bad_lines(done.stdout + done.stderr)


@dataclass
class Procs:
    url: str
    tmp_path: Path
    started: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(self, name: str, *argv: str, **env: str) -> subprocess.Popen[bytes]:
        log_path = self.tmp_path / f"{name}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", *argv],
                env=subprocess_env(self.url, **env),
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.started.append((name, proc, log_path))
        return proc

    def stop(self, prefix: str = "") -> None:
        chosen = [(n, p) for n, p, _ in self.started if n.startswith(prefix)]
        for _, proc in chosen:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in chosen:
            assert proc.wait(60) == 0, f"{name} exited {proc.returncode}"

    def kill_all(self) -> None:
        for _, proc, _ in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    def log(self, name: str) -> str:
        return next(p for n, _, p in self.started if n == name).read_text()


@pytest.fixture
def procs(pooled: Pooled, tmp_path: Path) -> Iterator[Procs]:
    started = Procs(pooled.url, tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


def test_a_pooled_engine_prepares_nothing_and_a_direct_one_keeps_preparing(
    pooled: Pooled, tmp_path: Path
) -> None:
    migrated(pooled, tmp_path)
    through = make_engine(pooled.url)
    direct = make_engine(pooled.direct_url)
    try:
        with through.connect() as a, through.connect() as b:
            for conn in (a, b):
                driver = conn.connection.driver_connection
                assert driver is not None
                assert driver.prepare_threshold is None
            # The same statement, more often than psycopg's threshold, from two client
            # connections that share server connections: nothing prepared, no clash.
            for _ in range(20):
                for conn in (a, b):
                    conn.execute(select(func.count()).select_from(jobs)).scalar_one()
                    conn.commit()
        with direct.connect() as conn:
            driver = conn.connection.driver_connection
            assert driver is not None
            assert not behind_pooler(driver)
            assert driver.prepare_threshold == 5
    finally:
        through.dispose()
        direct.dispose()


def test_every_process_works_through_pgbouncer_in_transaction_mode(
    pooled: Pooled, procs: Procs, tmp_path: Path
) -> None:
    migrated(pooled, tmp_path)
    most = [0]
    watching = threading.Event()

    def watch_pools() -> None:
        while not watching.is_set():
            most[0] = max(most[0], pooled.bouncer.server_connections(pooled.dbname))
            watching.wait(0.25)

    watcher = threading.Thread(target=watch_pools, daemon=True)
    watcher.start()
    api_port = free_port()
    procs.start("serve", "serve", "--port", str(api_port))
    for i in range(2):
        procs.start(f"scheduler-{i}", "scheduler")
    for i in range(EXECUTORS):
        procs.start(f"executor-{i}", "executor")

    engine = make_engine(pooled.url)
    ad_hoc: list[str] = []
    try:
        # Sixteen interpreters start on a small CI machine: the clock starts once
        # serve answers.
        try:
            wait_for(lambda: api_up(api_port), timeout=120, what="rota serve to answer /healthz")
        except AssertionError:
            raise AssertionError(f"serve never answered: {procs.log('serve')[-2000:]}") from None
        deadline = time.monotonic() + RUN_SECONDS
        while time.monotonic() < deadline:
            with engine.begin() as conn:  # the application's own transaction
                ids = enqueue_many(conn, [JobRequest("noop") for _ in range(20)])
                ad_hoc += [str(e.job_id) for e in ids]
                ad_hoc.append(str(enqueue(conn, "noop").job_id))
            ad_hoc.append(post_job(api_port))
            time.sleep(0.5)
        for argv in (("jobs", "--state", "FAILED"), ("schedules",), ("prune", "--dry-run")):
            done = rota(*argv, url=pooled.url)
            assert done.returncode == 0, (argv, done.stderr)
            assert not bad_lines(done.stdout + done.stderr), argv
        procs.stop("scheduler")

        def drained() -> bool:
            with engine.connect() as conn:
                left = conn.execute(
                    select(func.count())
                    .select_from(jobs)
                    .where(jobs.c.state.not_in(("SUCCEEDED", "FAILED", "CANCELLED")))
                ).scalar_one()
            return left == 0

        wait_for(drained, timeout=60, what="every job to finish")
        procs.stop("executor")
        procs.stop("serve")
        watching.set()
        watcher.join(5)

        with engine.connect() as conn:
            rows = conn.execute(
                select(
                    jobs.c.job_id, jobs.c.state, jobs.c.attempt_count, jobs.c.dedup_key
                ).order_by(jobs.c.scheduled_for)
            ).all()
            attempts = conn.execute(
                select(job_attempts.c.job_id, func.count())
                .group_by(job_attempts.c.job_id)
                .having(func.count() != 1)
            ).all()
    finally:
        watching.set()
        engine.dispose()

    assert all(r.state == "SUCCEEDED" and r.attempt_count == 1 for r in rows), [
        r for r in rows if r.state != "SUCCEEDED" or r.attempt_count != 1
    ][:5]
    assert attempts == []  # every job ran exactly once
    assert set(ad_hoc) <= {str(r.job_id) for r in rows}
    keys = sorted(r.dedup_key for r in rows if r.dedup_key and r.dedup_key.startswith("tick@"))
    assert len(keys) >= RUN_SECONDS - 5, keys
    instants = [calendar.timegm(time.strptime(k[5:], "%Y-%m-%dT%H:%M:%SZ")) for k in keys]
    steps = {b - a for a, b in itertools.pairwise(instants)}
    assert steps == {1}, f"gaps or duplicates among the per-second occurrences: {keys}"
    for name, _, _ in procs.started:
        assert not bad_lines(procs.log(name)), (name, bad_lines(procs.log(name))[:5])
    assert 0 < most[0] <= POOL_SIZE, f"SHOW POOLS: {most[0]} server connections"


def api_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def post_job(port: int) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/jobs",
        data=json.dumps({"job_type": "noop"}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 202
        location = str(answer.headers["Location"])
    return location.rsplit("/", 1)[1]


def start_latencies(engine: Engine, trials: int) -> list[float]:
    """Seconds from an enqueue's commit to its job's start, one job at a time, at idle."""
    found: list[float] = []
    for _ in range(trials):
        time.sleep(0.3)  # idle: the executor is waiting, not claiming
        with engine.begin() as conn:
            job_id = enqueue(conn, "noop").job_id
            committed_at = conn.execute(text("SELECT clock_timestamp()")).scalar_one()

        def started(job: object = job_id) -> Any:
            with engine.connect() as conn:
                return conn.execute(
                    select(job_attempts.c.started_at).where(job_attempts.c.job_id == job)
                ).scalar()

        started_at = wait_for(started, timeout=10, what="the job to start")
        found.append(max(timedelta(0), started_at - committed_at).total_seconds())
    return found


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


@pytest.mark.parametrize("listen", ["direct listen URL", "no listen URL"])
def test_a_job_enqueued_through_the_pooler_at_idle_starts_within_bounds(
    pooled: Pooled, procs: Procs, tmp_path: Path, listen: str
) -> None:
    migrated(pooled, tmp_path)
    with_listen = listen == "direct listen URL"
    env = {"ROTA_LISTEN_URL": pooled.direct_url} if with_listen else {}
    procs.start("executor", "executor", **env)
    name = "notifications_not_delivered"
    if with_listen:
        wait_for(lambda: "executor_started" in procs.log("executor"), 30, "the executor")
        time.sleep(1.0)  # the LISTEN in place, its probe answered
    else:
        wait_for(lambda: name in procs.log("executor"), 30, "the executor to notice")
    engine = make_engine(pooled.url)
    try:
        latencies = start_latencies(engine, trials=int(os.environ.get("ROTA_TEST_TRIALS", "12")))
    finally:
        engine.dispose()
    procs.stop("executor")
    log = procs.log("executor")
    assert not bad_lines(log), bad_lines(log)
    if with_listen:
        assert name not in log
        assert p95(latencies) < 0.1, latencies
    else:
        said = [line for line in log.splitlines() if name in line]
        assert len(said) == 1 and "ROTA_LISTEN_URL" in said[0], said
        # Within 1.5 s whatever the fleet; a lone executor polls every tenth of a
        # second (rota.executor.claim_loop.FLEET_POLLS_PER_SECOND).
        assert p95(latencies) < 0.3, latencies
    print(f"{listen}: p95 {p95(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms")


def test_index_upkeep_stands_down_behind_the_pooler(pooled: Pooled, tmp_path: Path) -> None:
    """Index upkeep needs a session of its own (a session lock, SET lock_timeout):
    behind a transaction pooler it turns itself off and leaves nothing on the server."""
    migrated(pooled, tmp_path)
    engine = make_engine(pooled.url)
    try:
        reindexer = Reindexer(engine, idle=lambda: True)
        result = reindexer.check_once()
        assert result.skipped and reindexer.disabled
    finally:
        engine.dispose()
    direct = make_engine(pooled.direct_url)
    try:
        with direct.connect() as conn:
            held = conn.execute(text(_ADVISORY_LOCKS_HERE))
            assert held.scalar_one() == 0
    finally:
        direct.dispose()
