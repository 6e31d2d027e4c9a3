"""Many executors through PgBouncer against a few direct ones: rate, connections, idle cost.

Three cases, each on a fresh database of one PostgreSQL server, in this order:

1. ``direct``: 2 ``rota executor`` processes at their defaults (``--db`` only),
   connected straight to the server;
2. ``pooled-2``: the same 2, through a PgBouncer in ``pool_mode = transaction``
   with ``default_pool_size = 8`` (the URL the only change);
3. ``pooled-48``: 48 executors with ``--concurrency 4`` and 3 ``rota scheduler``
   replicas (an ``every: 1s`` schedule applied), all through the same PgBouncer.

Every process starts on an empty queue, registers and settles first (``SETTLE_SECONDS``),
and the fleet drains as many jobs once, untimed (``warm_up``; ``--no-warm-up``: not);
then one transaction enqueues the no-op jobs (30,000 by default) and the clock runs
from its commit until every one of them has SUCCEEDED, so start-up is not in the rate. ``steady``
is the rate between the 10% and 90% marks. Server connections are sampled every
poll: PgBouncer's ``SHOW POOLS`` for the pooled cases, ``pg_stat_activity`` for the
direct one. The CPU of the drain (the PostgreSQL cluster, PgBouncer, the rota
processes) is printed per job, to say where the time goes. Afterwards each job is
checked: SUCCEEDED once, one attempt row.

Idle cost: after the drain of ``pooled-48``, its 51 processes idle for
``--idle-seconds``; the bench reports the CPU of the whole PostgreSQL cluster
(the postmaster's children) and of PgBouncer over that time, as a share of
one core, beside the same cluster's CPU over as long with no rota process at all.

Goals (issue 34): pooled-48 / direct >= 0.80, pooled-2 / direct >= 0.85, the
database's idle CPU with 48 idle executors below 5% of a core.

Each drain lasts a few seconds, and one round's ratios moved from 0.60 to 0.89
(pooled-48) within an hour on a 2-core virtual machine. So the bench runs
``--rounds`` rounds (5 by default), each the three cases in order with a ratio
of its own, and reports the median ratio beside every round's.

Run: ``python -m bench.bench_pooler [--jobs N] [--executors 48] [--idle-seconds 30]
[--rounds 5] [--no-warm-up] [--pg-url URL]``; the server must accept ``postgres``
without a password (the PgBouncer in front of it uses ``auth_type = trust``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import psycopg
from sqlalchemy import func, select

from bench.bench_executor import (
    CLK_TCK,
    DEFAULT_PG_URL,
    NOOP,
    ROOT,
    Database,
    Executors,
    _crossing,
    cpu_seconds,
    fresh_database,
    libpq,
    start_executors,
    verify,
)
from bench.pgbouncer import STATS_PERIOD_SECONDS, PgBouncer, start_pgbouncer
from rota.core.database import make_engine
from rota.core.listening import PROBE_SECONDS
from rota.core.tables import workers
from rota.producer.enqueue import JobRequest, enqueue_many
from rota.runtime.registry import DEFAULT_INTERVAL_SECONDS

POOL_SIZE = 8
POLL_SECONDS = 0.1
# A process's first seconds are start-up: its listener's probe (``PROBE_SECONDS``)
# and, through a transaction pooler, the listener's end when the probe does not
# come back; the heartbeat's own connection, opened for the registry's first
# refresh an interval after the registration. Enqueued a second after the last
# registration, the drain of 48 executors took in 48 of each. Every case waits
# as long.
SETTLE_SECONDS = max(PROBE_SECONDS, DEFAULT_INTERVAL_SECONDS) + 2.0
DRAIN_LIMIT_SECONDS = 600.0
# After the warm-up drain, before the timed one: the last outcomes written and
# every executor back to idle polling (behind the pooler, once a second each).
WARM_SETTLE_SECONDS = 3.0
REGISTER_LIMIT_SECONDS = 180.0
SCHEDULE_FILE = """\
job_types:
  bench.tick:
    handler: bench.handlers:noop
schedules:
  bench-every-second:
    job_type: bench.tick
    every: 1s
"""


@dataclass
class Case:
    name: str
    executors: int
    concurrency: int | None  # None: the executor's default
    schedulers: int
    pooled: bool


@dataclass
class Warmed:
    jobs: int  # drained untimed before the timed drain
    executors: int  # of the case's executors, how many ran one of them


@dataclass
class Drain:
    case: Case
    jobs: int
    seconds: float
    steady_rate: float
    server_connections_max: int
    verified: str
    cpu_ms_per_job: dict[str, float] = field(default_factory=dict)
    # Through PgBouncer: transactions and statements a job.
    traffic: dict[str, float] = field(default_factory=dict)
    idle: dict[str, float] = field(default_factory=dict)
    warmed: Warmed | None = None

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


def postmaster_children(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Every process of the server's cluster but the postmaster: backends and helpers."""
    row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    postmaster = int((Path(str(row[0])) / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == postmaster:
            children.append(int(entry))
    return children


def cluster_cpu(conn: psycopg.Connection[tuple[object, ...]]) -> float:
    return sum(cpu_seconds(p) for p in postmaster_children(conn))


def cpu_now(
    monitor: psycopg.Connection[tuple[object, ...]], bouncer: PgBouncer, pids: list[int]
) -> tuple[float, float, float]:
    """CPU seconds so far of the PostgreSQL cluster, PgBouncer and the ``pids`` together."""
    return cluster_cpu(monitor), cpu_seconds(bouncer.process.pid), sum(map(cpu_seconds, pids))


def start_schedulers(db: Database, count: int, workdir: Path, tag: str) -> Executors:
    procs = []
    logs = []
    for i in range(count):
        log_path = workdir / f"scheduler-{tag}-{i}.log"
        logs.append(log_path)
        with log_path.open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "rota.cli.main", "scheduler", "--db", db.url],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            )
    return Executors(procs, logs, [])


def apply_schedules(db: Database, workdir: Path) -> None:
    path = workdir / "schedules.yaml"
    path.write_text(SCHEDULE_FILE)
    subprocess.run(
        [sys.executable, "-m", "rota.cli.main", "apply", str(path), "--db", db.url],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def wait_registered(db: Database, executors: int, schedulers: int, procs: list[Executors]) -> None:
    engine = make_engine(db.url)
    deadline = time.monotonic() + REGISTER_LIMIT_SECONDS
    try:
        while True:
            with engine.connect() as conn:
                kinds: dict[str, int] = dict(
                    conn.execute(
                        select(workers.c.kind, func.count()).group_by(workers.c.kind)
                    ).all()
                )
            if kinds.get("executor", 0) >= executors and kinds.get("scheduler", 0) >= schedulers:
                return
            for p in procs:
                p.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {kinds} registered after {REGISTER_LIMIT_SECONDS:.0f} s")
            time.sleep(0.2)
    finally:
        engine.dispose()


def server_connections(
    monitor: psycopg.Connection[tuple[object, ...]], db: Database, bouncer: PgBouncer | None
) -> int:
    if bouncer is not None:
        return bouncer.server_connections(db.name)
    row = monitor.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def drain(
    case: Case,
    admin_url: str,
    bouncer: PgBouncer,
    count: int,
    workdir: Path,
    idle_seconds: float,
    warm: bool = True,
) -> Drain:
    with fresh_database("postgresql", admin_url) as db:
        through = replace(db, url=bouncer.url(db.url)) if case.pooled else db
        if case.schedulers:
            apply_schedules(db, workdir)
        fleet = [start_executors(through, case.executors, case.concurrency, workdir, tag=case.name)]
        if case.schedulers:
            fleet.append(start_schedulers(through, case.schedulers, workdir, case.name))
        assert db.libpq_url is not None
        monitor = psycopg.connect(db.libpq_url, autocommit=True)
        try:
            wait_registered(db, case.executors, case.schedulers, fleet)
            time.sleep(SETTLE_SECONDS)
            warmed = warm_up(db, monitor, count, fleet) if warm else None
            before = warmed.jobs if warmed else 0
            stats_before = settled_stats(bouncer, db.name)
            pids = [p.pid for ex in fleet for p in ex.procs]
            cpu_before = cpu_now(monitor, bouncer, pids)
            enqueue_noops(db, count)
            started = time.perf_counter()
            samples: list[tuple[float, int]] = [(0.0, 0)]
            connections = 0
            while samples[-1][1] < count:
                time.sleep(POLL_SECONDS)
                elapsed = time.perf_counter() - started
                samples.append((elapsed, succeeded(monitor) - before))
                pool = bouncer if case.pooled else None
                connections = max(connections, server_connections(monitor, db, pool))
                if elapsed > DRAIN_LIMIT_SECONDS:
                    raise RuntimeError(f"{case.name}: {samples[-1][1]} of {count} done")
                for p in fleet:
                    p.check_alive()
            cpu_after = cpu_now(monitor, bouncer, pids)
            traffic = {}
            if case.pooled:
                traffic = _traffic(stats_before, settled_stats(bouncer, db.name), count)
            cpu = {
                name: (after - before) * 1000 / count
                for name, before, after in zip(
                    ("database", "pgbouncer", "rota"), cpu_before, cpu_after, strict=True
                )
            }
            idle = measure_idle(monitor, bouncer, fleet, idle_seconds) if idle_seconds else {}
        finally:
            for p in fleet:
                p.stop()
            monitor.close()
        middle = _crossing(samples, 0.9 * count) - _crossing(samples, 0.1 * count)
        steady = 0.8 * count / max(1e-9, middle)
        return Drain(
            case,
            count,
            samples[-1][0],
            steady,
            connections,
            verify(db, count + before, job_type=NOOP.name),
            cpu,
            traffic,
            idle,
            warmed,
        )


def enqueue_noops(db: Database, count: int) -> None:
    """``count`` no-op jobs, enqueued in one transaction."""
    engine = make_engine(db.url)
    try:
        with engine.begin() as conn:
            enqueue_many(conn, [JobRequest(NOOP.name) for _ in range(count)])
    finally:
        engine.dispose()


def succeeded(monitor: psycopg.Connection[tuple[object, ...]]) -> int:
    row = monitor.execute(
        "SELECT count(*) FROM jobs WHERE state = 'SUCCEEDED' AND job_type = %s", (NOOP.name,)
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def warm_up(
    db: Database,
    monitor: psycopg.Connection[tuple[object, ...]],
    count: int,
    fleet: list[Executors],
) -> Warmed:
    """Drain ``count`` jobs once, untimed, before the timed drain (``--no-warm-up``: not).

    An executor that has run no job yet has not opened its outcome writer's
    connection and does not know how long its jobs take, so its first claim
    takes only its free slots; an executor that has run for a while has done
    both long ago. Without it, each of 48 fresh executors added a claim and an
    outcome batch of 4 jobs, a connection and its check to every drain, about
    a sixth of pooled-48's statements. The dead rows it leaves are vacuumed, as
    autovacuum would; the timed drain still runs beside its 30,000 finished
    jobs, in a table whose size estimates the vacuum brought up to date.
    """
    enqueue_noops(db, count)
    deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
    while succeeded(monitor) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"warm-up: {succeeded(monitor)} of {count} done")
        for p in fleet:
            p.check_alive()
        time.sleep(POLL_SECONDS)
    row = monitor.execute(
        "SELECT count(DISTINCT a.worker_id) FROM job_attempts a"
        " JOIN jobs j ON j.job_id = a.job_id WHERE j.job_type = %s",
        (NOOP.name,),
    ).fetchone()
    assert row is not None
    monitor.execute("VACUUM jobs, job_attempts")
    time.sleep(WARM_SETTLE_SECONDS)
    return Warmed(count, int(str(row[0])))


def settled_stats(bouncer: PgBouncer, dbname: str) -> dict[str, int]:
    """SHOW STATS once the counters of everything sent so far are in them."""
    time.sleep(STATS_PERIOD_SECONDS + 0.1)
    return bouncer.stats(dbname)


def _traffic(before: dict[str, int], after: dict[str, int], jobs: int) -> dict[str, float]:
    def delta(key: str) -> int:
        return after.get(key, 0) - before.get(key, 0)

    return {
        "transactions a job": delta("total_xact_count") / jobs,
        "statements a job": delta("total_query_count") / jobs,
    }


def measure_idle(
    monitor: psycopg.Connection[tuple[object, ...]],
    bouncer: PgBouncer,
    fleet: list[Executors],
    seconds: float,
) -> dict[str, float]:
    """CPU over ``seconds`` of idling, each as a share of one core."""
    pids = [p.pid for ex in fleet for p in ex.procs]
    # The drain's dirty pages are written now, not by a checkpoint inside the window.
    monitor.execute("CHECKPOINT")
    before = cpu_now(monitor, bouncer, pids)
    t0 = time.perf_counter()
    time.sleep(seconds)
    after = cpu_now(monitor, bouncer, pids)
    wall = time.perf_counter() - t0
    return {
        "database": (after[0] - before[0]) / wall,
        "pgbouncer": (after[1] - before[1]) / wall,
        "rota": (after[2] - before[2]) / wall,
    }


def quiet_cluster_cpu(admin_url: str, seconds: float) -> float:
    """The cluster's own CPU with no rota process, as a share of one core."""
    with psycopg.connect(libpq(admin_url), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        before = cluster_cpu(conn)
        t0 = time.perf_counter()
        time.sleep(seconds)
        return (cluster_cpu(conn) - before) / (time.perf_counter() - t0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_pooler",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--executors", type=int, default=48)
    parser.add_argument("--schedulers", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds of the three cases, each a ratio of its own; the median is the figure",
    )
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="time the first drain of freshly started executors (see warm_up)",
    )
    args = parser.parse_args(argv)
    cases = [
        Case("direct", 2, None, 0, pooled=False),
        Case("pooled-2", 2, None, 0, pooled=True),
        Case(f"pooled-{args.executors}", args.executors, 4, args.schedulers, pooled=True),
    ]
    print(
        f"clock ticks/s {CLK_TCK}; {os.cpu_count()} cores; {args.jobs:,} no-op jobs a case;"
        f" {args.rounds} rounds; warm-up drain {'on' if args.warm_up else 'off (--no-warm-up)'}"
    )
    quiet = quiet_cluster_cpu(args.pg_url, min(10.0, args.idle_seconds))
    rounds: list[list[Drain]] = []
    with tempfile.TemporaryDirectory(prefix="rota_pooler_") as tmp:
        workdir = Path(tmp)
        bouncer = start_pgbouncer(workdir, args.pg_url, POOL_SIZE)
        try:
            for number in range(1, args.rounds + 1):
                print(f"\n== round {number} ==", flush=True)
                results = []
                for case in cases:
                    last = number == args.rounds and case is cases[-1]
                    idle = args.idle_seconds if last else 0.0
                    result = drain(
                        case, args.pg_url, bouncer, args.jobs, workdir, idle, warm=args.warm_up
                    )
                    results.append(result)
                    print_drain(result)
                rounds.append(results)
                direct, two, many = results
                print(
                    f"ratios to direct: {two.case.name} {two.rate / direct.rate:.2f}"
                    f" ({two.steady_rate / direct.steady_rate:.2f} steady),"
                    f" {many.case.name} {many.rate / direct.rate:.2f}"
                    f" ({many.steady_rate / direct.steady_rate:.2f} steady)",
                    flush=True,
                )
        finally:
            bouncer.process.send_signal(signal.SIGTERM)
            bouncer.process.wait(10)
    print(f"\n== ratios to direct (2 executors at their defaults), median of {len(rounds)} ==")
    for index, goal in ((1, 0.85), (2, 0.80)):
        wall = statistics.median(r[index].rate / r[0].rate for r in rounds)
        steady = statistics.median(r[index].steady_rate / r[0].steady_rate for r in rounds)
        print(
            f"{rounds[0][index].case.name} / direct: {wall:.2f} wall, {steady:.2f} steady"
            f" (goal >= {goal:.2f})"
        )
    many_case = cases[-1]
    most = max(r[2].server_connections_max for r in rounds)
    print(f"server connections: {many_case.name} at most {most} (pool {POOL_SIZE})")
    print(f"\n== idle, {args.idle_seconds:.0f} s, share of one core ==")
    print(f"PostgreSQL cluster with no rota process: {quiet:.1%}")
    idle = rounds[-1][2].idle
    print(
        f"with {many_case.executors} idle executors and {many_case.schedulers} schedulers:"
        f" PostgreSQL {idle['database']:.1%} (goal < 5%), PgBouncer {idle['pgbouncer']:.1%},"
        f" the rota processes {idle['rota']:.1%}"
    )
    failed = [r.case.name for results in rounds for r in results if r.verified != "verified"]
    return 1 if failed else 0


def print_drain(result: Drain) -> None:
    case = result.case
    print(
        f"{case.name:>10}: {case.executors} executors"
        f" (--concurrency {case.concurrency or 'default'}), {case.schedulers}"
        f" schedulers; {result.rate:,.0f} jobs/s ({result.steady_rate:,.0f} steady),"
        f" {result.seconds:.1f} s; server connections max"
        f" {result.server_connections_max}; {result.verified}",
        flush=True,
    )
    print(
        "            CPU ms a job: "
        + ", ".join(f"{k} {v:.3f}" for k, v in result.cpu_ms_per_job.items()),
        flush=True,
    )
    if result.warmed is not None:
        print(
            f"            after an untimed warm-up drain of {result.warmed.jobs:,} jobs,"
            f" which {result.warmed.executors} of the {case.executors} executors took part in",
            flush=True,
        )
    if result.traffic:
        print(
            "            through PgBouncer: "
            + ", ".join(f"{k} {v:.3f}" for k, v in result.traffic.items()),
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
