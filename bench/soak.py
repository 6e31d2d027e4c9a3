"""The chaos soak: three schedulers, three executors, signals and database outages.

    python -m bench.soak [--minutes N] [--failover] [--seed S] [--keep]

On a PostgreSQL cluster of its own (``bench/soak_cluster.py``; never the shared
server) it migrates, applies a schedule file of per-second rules in several
time zones (``every:``, six-field cron, RRULE) whose job types succeed, fail and
retry, time out, run long enough to be cancelled, and run as ``command:``
handlers (``bench/soak_handlers.py``), and starts three ``rota scheduler`` and
three ``rota executor`` processes. While ad-hoc jobs are enqueued continuously
and running jobs are cancelled, every few seconds a random process gets
SIGKILL or SIGTERM and is restarted; twice the server is stopped hard
(``pg_ctl stop -m immediate``) and started again. With ``--failover`` the
processes use a multi-host URL and the second outage kills the primary and
promotes its synchronous standby.

Then the chaos stops: each live process must still tick or claim, the
schedulers stop, the executors drain and stop, and the checks of
``bench/soak_checks.py`` run. Prints the figures and the checks; exit status 1
when any check fails, with its evidence.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import DBAPIError, OperationalError

import rota
from bench.soak_checks import (
    Check,
    check_attempt_budget,
    check_committed,
    check_generations,
    check_live,
    check_logs,
    check_occurrences,
    check_recovered,
    check_settled,
    check_terminal_kept,
    claims_since,
    window_end,
)
from bench.soak_cluster import Cluster, free_port
from rota.core.database import display_url, make_engine
from rota.core.queries.schedules import read_clock
from rota.core.states import LEASED, TERMINAL, JobState
from rota.core.tables import job_attempts, jobs
from rota.operations.jobs import cancel_job
from rota.scheduler.schedule_file.loader import load_schedule_file

ROOT = Path(__file__).resolve().parent.parent
RECOVERY_LIMIT = 60.0  # seconds after the server is back for work to resume
LEASE_SECONDS = 10.0  # every soak job type's lease (the schedule file below)

SCHEDULE_FILE_TEMPLATE = """\
# The chaos soak's schedules (bench/soak.py): per-second rules in several zones.
# catch_up with a grace and window longer than any outage: every instant is owed a job.
defaults:
  misfire: catch_up
  grace: 10m
  catch_up_window: 1h
job_types:
  soak.ok:
    handler: bench.soak_handlers:ok
    lease: {lease}s
  soak.flaky:
    handler: bench.soak_handlers:flaky
    lease: {lease}s
    max_attempts: 3
    backoff: {base: 1s, max: 2s}
  soak.broken:
    handler: bench.soak_handlers:broken
    lease: {lease}s
    max_attempts: 2
    backoff: {base: 1s, max: 2s}
  soak.permanent:
    handler: bench.soak_handlers:permanent
    lease: {lease}s
  soak.hang:
    handler: bench.soak_handlers:hang
    timeout: 1s
    lease: {lease}s
    max_attempts: 2
    backoff: {base: 1s, max: 2s}
  soak.long:
    handler: bench.soak_handlers:long
    lease: {lease}s
    max_attempts: 3
    backoff: {base: 1s, max: 2s}
  soak.cmd:
    command: ["sh", "-c", "sleep 0.2; echo soak"]
    lease: {lease}s
    timeout: 20s
  soak.cmd_fail:
    command: ["sh", "-c", "echo failing >&2; exit 3"]
    lease: {lease}s
    max_attempts: 2
    backoff: {base: 1s, max: 2s}
schedules:
  every-second-utc:
    job_type: soak.ok
    every: 1s
  cron-second-berlin:
    job_type: soak.flaky
    cron: "* * * * * *"
    timezone: Europe/Berlin
  cron-2s-new-york:
    job_type: soak.cmd
    cron: "*/2 * * * * *"
    timezone: America/New_York
  rrule-3s-tokyo:
    job_type: soak.broken
    rrule: "FREQ=SECONDLY;INTERVAL=3"
    timezone: Asia/Tokyo
  every-5s-hang:
    job_type: soak.hang
    every: 5s
  cron-7s-kolkata:
    job_type: soak.long
    cron: "*/7 * * * * *"
    timezone: Asia/Kolkata
  every-4s-cmd-fail:
    job_type: soak.cmd_fail
    every: 4s
"""

SCHEDULE_FILE = SCHEDULE_FILE_TEMPLATE.replace("{lease}", f"{LEASE_SECONDS:g}")

AD_HOC = ["soak.ok", "soak.ok", "soak.flaky", "soak.permanent", "soak.long", "soak.cmd"]


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Process:
    """One rota process, restarted under the same slot; each start logs to its own file."""

    def __init__(self, kind: str, index: int, url: str, log_dir: Path) -> None:
        self.kind, self.index, self.url, self.log_dir = kind, index, url, log_dir
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.log_path = log_dir / "unused.log"

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.index}"

    def start(self) -> None:
        self.starts += 1
        self.health_port = free_port()
        argv = [
            self.kind,
            "--db",
            self.url,
            "--liveness-interval",
            "1",
            "--health-port",
            str(self.health_port),
            "--health-host",
            "127.0.0.1",
        ]
        if self.kind == "executor":
            argv += [
                "--concurrency",
                "6",
                "--poll-interval",
                "0.5",
                "--sweep-interval",
                "1",
                "--drain-timeout",
                "3",
            ]
        else:
            argv += ["--max-sleep", "0.5"]
        path = self.log_path = self.log_dir / f"{self.name}-{self.starts}.log"
        with path.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", *argv],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int, timeout: float = 30) -> int | None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return None

    def started(self) -> bool:
        """Did this start get as far as running (its ``*_started`` event logged)?"""
        return f"event={self.kind}_started".encode() in self.log_path.read_bytes()

    def last_line(self) -> str:
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return lines[-1][:300] if lines else "(empty log)"

    def healthy(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.health_port}/healthz"
            with urllib.request.urlopen(url, timeout=3) as reply:
                return int(reply.status) == 200
        except OSError:
            return False


@dataclass
class Figures:
    kills: Counter[str] = field(default_factory=Counter)
    restarts: int = 0
    # Processes that exited without a signal from the soak, restarted as a supervisor
    # (Kubernetes) would: refusing to start while the server is down is fair (exit 1
    # with a message); a process that had started and then died is a defect.
    startup_refusals: list[str] = field(default_factory=list)
    died: list[str] = field(default_factory=list)
    slow_stops: list[str] = field(default_factory=list)
    early_terms: int = 0  # SIGTERMs that came before the process had started
    outages: list[dict[str, Any]] = field(default_factory=list)
    enqueued: list[uuid.UUID] = field(default_factory=list)
    enqueue_errors: int = 0
    cancels: int = 0
    cancel_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Load(threading.Thread):
    """Ad-hoc jobs (enqueue / enqueue_many) and cancels of running jobs, until stopped."""

    def __init__(self, engine: Engine, figures: Figures, rng: random.Random) -> None:
        super().__init__(name="soak-load", daemon=True)
        self.engine, self.figures, self.rng = engine, figures, rng
        self.halt = threading.Event()
        self.crash: str | None = None  # an unexpected error that ended the load early

    def run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # reported as a failed check, not lost in a thread
            self.crash = f"{type(exc).__name__}: {exc}"[:500]

    def _loop(self) -> None:
        n = 0
        while not self.halt.wait(0.4):
            n += 1
            try:
                self._enqueue(n)
            except (OperationalError, DBAPIError):
                with self.figures.lock:
                    self.figures.enqueue_errors += 1
            if n % 5 == 0:
                try:
                    self._cancel()
                except (OperationalError, DBAPIError):
                    with self.figures.lock:
                        self.figures.cancel_errors += 1

    def _enqueue(self, n: int) -> None:
        with self.engine.begin() as conn:
            if n % 2:
                job_type = self.rng.choice(AD_HOC)
                made = [rota.enqueue(conn, job_type, args={"n": n}, dedup_key=f"soak-{n}")]
            else:
                made = rota.enqueue_many(
                    conn,
                    [
                        rota.JobRequest(
                            self.rng.choice(AD_HOC), args={"n": n, "i": i}, priority=i % 3
                        )
                        for i in range(3)
                    ],
                )
        with self.figures.lock:  # committed: these must exist at the end
            self.figures.enqueued.extend(e.job_id for e in made if e.created)

    def _cancel(self) -> None:
        with self.engine.connect() as conn:
            running = [
                r[0]
                for r in conn.execute(
                    select(jobs.c.job_id).where(
                        jobs.c.state == JobState.RUNNING, jobs.c.job_type == "soak.long"
                    )
                )
            ]
        if running:
            done = cancel_job(self.engine, str(self.rng.choice(running)))
            if done.changed:
                with self.figures.lock:
                    self.figures.cancels += 1


class Soak:
    def __init__(self, minutes: float, failover: bool, seed: int, workdir: Path) -> None:
        self.minutes, self.failover, self.seed = minutes, failover, seed
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.log_dir = workdir / "logs"
        self.log_dir.mkdir(parents=True)
        workdir.chmod(0o755)  # the server may run as the postgres user (run as root)
        (workdir / "pg").mkdir()
        self.cluster = Cluster(workdir / "pg", standby=failover)
        self.figures = Figures()
        self.fleet: list[Process] = []
        self.engine: Engine | None = None
        self.checks: list[Check] = []
        self.snapshot_before_failover: dict[uuid.UUID, str] = {}

    # -- set-up ---------------------------------------------------------------

    def setup(self) -> tuple[str, Path]:
        self.cluster.create()
        url = self.cluster.rota_url()
        log(f"cluster up: {display_url(url)}")
        schedule_path = self.workdir / "soak-schedules.yaml"
        schedule_path.write_text(SCHEDULE_FILE)
        for argv in (["migrate"], ["apply", str(schedule_path)]):
            done = subprocess.run(
                [sys.executable, "-m", "rota.cli.main", *argv, "--db", url],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(f"rota {argv[0]} failed: {done.stdout}{done.stderr}")
        self.engine = make_engine(url, pool_size=4)
        return url, schedule_path

    # -- chaos ----------------------------------------------------------------

    def chaos(self, url: str) -> None:
        assert self.engine is not None
        self.fleet = [
            Process(k, i, url, self.log_dir) for k in ("scheduler", "executor") for i in range(3)
        ]
        for p in self.fleet:
            p.start()
        load = Load(self.engine, self.figures, random.Random(self.seed + 1))
        load.start()
        duration = self.minutes * 60
        began = time.monotonic()
        outages_at = [duration / 3, 2 * duration / 3]
        while (elapsed := time.monotonic() - began) < duration:
            if outages_at and elapsed >= outages_at[0]:
                outages_at.pop(0)
                last = not outages_at
                # The second outage outlasts the leases: handlers still run when the
                # server returns and the sweeper takes their jobs back (stale holders).
                down = LEASE_SECONDS + 2.0 if last else self.rng.uniform(2.0, 4.0)
                if last:
                    self.stale_holder(down)
                self.outage(down, failover=self.failover and last)
                continue
            time.sleep(self.rng.uniform(1.5, 4.0))
            self.supervise()
            victim = self.rng.choice(self.fleet)
            sig = self.rng.choice([signal.SIGKILL, signal.SIGTERM])
            # Before its *_started event a process has no signal handlers yet: a
            # SIGTERM then ends it like any Python program (-15), which is fair.
            handling = victim.started()
            code = victim.signal(sig)
            self.figures.kills[signal.Signals(sig).name] += 1
            if sig == signal.SIGTERM and not handling:
                self.figures.early_terms += 1
            elif sig == signal.SIGTERM and code != 0:
                self.figures.slow_stops.append(
                    f"{victim.log_path.name}: SIGTERM during the chaos: "
                    + ("did not stop within 30s" if code is None else f"exit {code}")
                )
            time.sleep(self.rng.uniform(0.0, 1.0))
            victim.start()
            self.figures.restarts += 1
        load.halt.set()
        load.join(timeout=30)
        ran = Check(
            "the ad-hoc load and cancels ran to the end",
            f"{len(self.figures.enqueued)} enqueued, {self.figures.cancels} cancelled",
        )
        if load.crash is not None:
            ran.violations.append(f"the load thread stopped early: {load.crash}")
        if not self.figures.enqueued or not self.figures.cancels:
            ran.violations.append("nothing enqueued or nothing cancelled (vacuous)")
        self.checks.append(ran)

    def supervise(self) -> None:
        """Restart every process that exited on its own, and say why it exited."""
        for p in self.fleet:
            if p.proc is None or p.alive():
                continue
            code = p.proc.returncode
            what = f"{p.log_path.name}: exit {code}: {p.last_line()}"
            (self.figures.died if p.started() else self.figures.startup_refusals).append(what)
            p.start()
            self.figures.restarts += 1

    def stale_holder(self, down: float) -> None:
        """A job that still runs when the server comes back, its lease expired meanwhile.

        Whether one of the load's jobs ran through the outage was left to chance
        (a short soak once had none: no lease expired, the sweeper had nothing to
        do). This one outlasts the outage, so its holder's next heartbeat finds
        the lease gone and the sweeper must take the job back.
        """
        assert self.engine is not None
        with self.engine.begin() as conn:
            made = rota.enqueue(conn, "soak.long", args={"seconds": down + 4.0})
        with self.figures.lock:
            self.figures.enqueued.append(made.job_id)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            with self.engine.connect() as conn:
                state = conn.execute(
                    select(jobs.c.state).where(jobs.c.job_id == made.job_id)
                ).scalar_one()
            if state == JobState.RUNNING:
                return
            time.sleep(0.05)
        log(f"the stale holder {made.job_id} was not claimed within 10s")

    def outage(self, down: float, *, failover: bool) -> None:
        assert self.engine is not None
        record: dict[str, Any] = {"kind": "failover" if failover else "restart"}
        if failover:
            self.snapshot_before_failover = self._finished_snapshot()
        began = time.monotonic()
        node = self.cluster.current
        node.stop_immediate()
        if failover:
            assert self.cluster.standby is not None
            time.sleep(down)
            self.cluster.standby.promote()
            self.cluster.standby.wait_writable(Cluster.DBNAME)
            self.cluster.current = self.cluster.standby
        else:
            time.sleep(down)
            node.start()
        up = time.monotonic()
        record["down_s"] = up - began
        log(f"outage ({record['kind']}): server back after {record['down_s']:.1f}s")
        record.update(self._recovery(up))
        self.figures.outages.append(record)

    def _finished_snapshot(self) -> dict[uuid.UUID, str]:
        assert self.engine is not None
        with self.engine.connect() as conn:
            return {
                r.job_id: r.state
                for r in conn.execute(
                    select(jobs.c.job_id, jobs.c.state).where(jobs.c.state.in_(TERMINAL))
                )
            }

    def _recovery(self, up: float) -> dict[str, float | None]:
        """Seconds from the server's return until a new job ran, and a new occurrence was made."""
        assert self.engine is not None
        probe: uuid.UUID | None = None
        since: datetime | None = None
        ran = made = None
        while time.monotonic() - up < RECOVERY_LIMIT and (ran is None or made is None):
            try:
                with self.engine.begin() as conn:
                    if since is None:
                        since = read_clock(conn)
                    if probe is None:
                        probe = rota.enqueue(conn, "soak.ok", args={"probe": True}).job_id
                        with self.figures.lock:
                            self.figures.enqueued.append(probe)
                    state = conn.execute(
                        select(jobs.c.state).where(jobs.c.job_id == probe)
                    ).scalar_one()
                    if ran is None and state == JobState.SUCCEEDED:
                        ran = time.monotonic() - up
                    newer = conn.execute(
                        select(func.count())
                        .select_from(jobs)
                        .where(jobs.c.schedule_name.is_not(None), jobs.c.created_at > since)
                    ).scalar_one()
                    if made is None and newer:
                        made = time.monotonic() - up
            except (OperationalError, DBAPIError):
                pass
            self.supervise()
            time.sleep(0.2)
        return {"executor_recovery_s": ran, "scheduler_recovery_s": made}

    # -- the end --------------------------------------------------------------

    def settle(self) -> tuple[datetime, datetime]:
        """Every process up; each must tick or claim; schedulers stop; executors drain."""
        assert self.engine is not None
        self.supervise()
        time.sleep(3)  # restarted processes register
        with self.engine.begin() as conn:
            calm = read_clock(conn)
        executors = [p for p in self.fleet if p.kind == "executor"]
        deadline = time.monotonic() + 45
        while True:  # probes until every executor has claimed something (or the deadline)
            with self.engine.begin() as conn:
                probes = rota.enqueue_many(
                    conn, [rota.JobRequest("soak.ok", args={"liveness": i}) for i in range(6)]
                )
            self.figures.enqueued.extend(e.job_id for e in probes)
            with self.engine.connect() as conn:
                claimed = claims_since(conn, [p.proc.pid for p in executors if p.proc], calm)
            if all(claimed.get(p.proc.pid, 0) for p in executors if p.proc):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(1)
        time.sleep(2)  # at least one more liveness interval for every process
        alive = [(p.kind, p.proc.pid) for p in self.fleet if p.proc and p.alive()]
        with self.engine.connect() as conn:
            self.checks.append(check_live(conn, alive, calm, claimed))
        unhealthy = [p.name for p in self.fleet if not p.healthy()]
        health = Check(
            "every process answers /healthz 200",
            f"{len(self.fleet) - len(unhealthy)} of {len(self.fleet)}",
        )
        health.violations = [f"{name}: /healthz not 200" for name in unhealthy]
        self.checks.append(health)
        for p in self.fleet:
            if p.kind == "scheduler":
                p.signal(signal.SIGTERM)
        with self.engine.begin() as conn:
            stopped = read_clock(conn)
        deadline = time.monotonic() + 120
        # The checks judge what is pending against the instant the drain saw nothing
        # due: a retry whose backoff ends between that instant and the executors'
        # SIGTERM waits by design, and is not lost.
        drained = stopped
        while time.monotonic() < deadline:  # drain: nothing due, nothing held
            with self.engine.begin() as conn:
                now = drained = read_clock(conn)
                busy = conn.execute(
                    select(func.count())
                    .select_from(jobs)
                    .where(
                        (jobs.c.state.in_(LEASED))
                        | (
                            jobs.c.state.in_([JobState.QUEUED, JobState.RETRY_WAIT])
                            & (jobs.c.run_after <= now)
                        )
                    )
                ).scalar_one()
            if busy == 0:
                break
            time.sleep(0.5)
        codes = {p.name: p.signal(signal.SIGTERM) for p in self.fleet if p.kind == "executor"}
        stops = Check(
            "every process stops cleanly on SIGTERM (chaos and end)",
            ", ".join(f"{k}={v}" for k, v in codes.items()),
        )
        stops.violations = [f"{k}: exit {v}" for k, v in codes.items() if v != 0]
        stops.violations += self.figures.slow_stops
        self.checks.append(stops)
        died = Check(
            "no running process died on its own",
            f"{len(self.figures.died)} died; {len(self.figures.startup_refusals)} "
            "refused to start while the server was down (restarted)",
        )
        died.violations = list(self.figures.died)
        self.checks.append(died)
        return stopped, drained

    def verify(self, schedule_path: Path, stopped: datetime, drained: datetime) -> None:
        assert self.engine is not None
        specs = load_schedule_file(schedule_path).schedules
        with self.engine.connect() as conn:
            self.checks += [
                check_occurrences(conn, specs, window_end(stopped)),
                check_settled(conn, drained),
                check_committed(conn, self.figures.enqueued),
                check_generations(conn),
                check_attempt_budget(conn),
            ]
            if self.failover:
                self.checks.append(
                    check_terminal_kept(conn, self.snapshot_before_failover, "the failover")
                )
        self.checks.append(check_logs(self.log_dir.glob("*.log")))
        self.checks.append(
            check_recovered(
                "executors",
                [o["executor_recovery_s"] for o in self.figures.outages],
                RECOVERY_LIMIT,
            )
        )
        self.checks.append(
            check_recovered(
                "schedulers",
                [o["scheduler_recovery_s"] for o in self.figures.outages],
                RECOVERY_LIMIT,
            )
        )

    def report(self, seconds: float) -> None:
        assert self.engine is not None
        with self.engine.connect() as conn:
            states: dict[str, int] = dict(
                conn.execute(select(jobs.c.state, func.count()).group_by(jobs.c.state)).all()
            )
            scheduled = conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.schedule_name.is_not(None))
            ).scalar_one()
            outcomes: dict[str | None, int] = dict(
                conn.execute(
                    select(job_attempts.c.outcome, func.count()).group_by(job_attempts.c.outcome)
                ).all()
            )
            gaps = reclaim_gaps(conn)
        f = self.figures
        print("\n== chaos soak figures ==")
        print(
            f"seed {self.seed}; {seconds / 60:.1f} min in all; chaos {self.minutes:g} min"
            f"{'; failover' if self.failover else ''}"
        )
        print(
            f"jobs: {sum(states.values())} ({scheduled} scheduled, {len(f.enqueued)} ad hoc); "
            + ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
        )
        print(
            f"attempts: {sum(outcomes.values())}; "
            + ", ".join(
                f"{k or 'open'} {v}" for k, v in sorted(outcomes.items(), key=lambda kv: str(kv[0]))
            )
        )
        print(
            f"signals: {sum(f.kills.values())} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(f.kills.items()))
            + f"; {f.early_terms} SIGTERM before start-up); restarts {f.restarts} "
            f"({len(f.startup_refusals)} after a refused start-up); cancels {f.cancels}; "
            f"enqueue errors during outages {f.enqueue_errors}"
        )
        if gaps:
            gaps.sort()
            print(
                f"leases expired (killed executor or outage): {len(gaps)}; the job claimed again "
                f"{gaps[len(gaps) // 2]:.1f}s (median), {gaps[-1]:.1f}s (max) after the "
                "sweeper took it back"
            )
        for i, o in enumerate(f.outages, 1):
            ran, made = o["executor_recovery_s"], o["scheduler_recovery_s"]
            print(
                f"outage {i} ({o['kind']}): down {o['down_s']:.1f}s; a new job ran "
                f"{'-' if ran is None else f'{ran:.1f}s'} and a new occurrence was made "
                f"{'-' if made is None else f'{made:.1f}s'} after the server was back"
            )
        print("\n== checks ==")
        for check in self.checks:
            print(check.render())
        failed = [c.name for c in self.checks if not c.ok]
        print(
            f"\nsoak {'FAILED: ' + '; '.join(failed) if failed else 'passed'}"
            f" (logs: {self.log_dir})"
        )

    def teardown(self) -> None:
        for p in self.fleet:
            if p.alive():
                p.signal(signal.SIGKILL)
        if self.engine is not None:
            self.engine.dispose()
        self.cluster.destroy()


def reclaim_gaps(conn: Connection) -> list[float]:
    """Seconds from a sweep (an attempt closed LEASE_EXPIRED) to the job's next claim."""
    rows = conn.execute(
        select(
            job_attempts.c.job_id,
            job_attempts.c.lease_generation,
            job_attempts.c.started_at,
            job_attempts.c.ended_at,
            job_attempts.c.outcome,
        ).order_by(job_attempts.c.job_id, job_attempts.c.lease_generation)
    ).all()
    gaps = []
    for older, newer in itertools.pairwise(rows):
        if (
            older.job_id == newer.job_id
            and older.outcome == "LEASE_EXPIRED"
            and older.ended_at is not None
        ):
            gaps.append((newer.started_at - older.ended_at).total_seconds())
    return gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=5.0, help="chaos duration (default 5)")
    parser.add_argument(
        "--failover",
        action="store_true",
        help="a synchronous standby, promoted while the primary is killed",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the working directory (logs) after a passing run"
    )
    args = parser.parse_args(argv)
    if not (0.2 <= args.minutes <= 24 * 60):
        parser.error("--minutes must be from 0.2 to 1440")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    workdir = Path(tempfile.mkdtemp(prefix="rota-soak-"))
    soak = Soak(args.minutes, args.failover, seed, workdir)
    started = time.monotonic()
    log(f"seed {seed}, working directory {workdir}")
    try:
        url, schedule_path = soak.setup()
        soak.chaos(url)
        stopped, drained = soak.settle()
        soak.verify(schedule_path, stopped, drained)
        soak.report(time.monotonic() - started)
    finally:
        soak.teardown()
    failed = any(not c.ok for c in soak.checks)
    if not failed and not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
