"""Deadlines with real processes: two `rota scheduler` replicas (one SIGKILLed), an executor.

Four schedules fire once, at the same instant a few seconds ahead, each with
a deadline: one whose handler fails, one whose handler is slow (it succeeds
after its deadline), one paused across its instant, and one whose handler
cannot be imported (its job waits in the queue). One replica is SIGKILLed
between the instant and the deadlines. Each schedule gets exactly one late
record with its reason within 5 s of its deadline, one ``deadline_missed``
line over both replicas' logs, and the slow one keeps its record, with its
finish time, once its job succeeds.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.core.database import make_engine
from rota.core.queries.late_occurrences import newest_late
from rota.core.queries.schedules import read_clock
from rota.core.timefmt import utc_key
from rota.operations.schedules import pause
from rota.scheduler.apply import apply_file
from tests.support.executor_support import REPO_ROOT, Executors, subprocess_env, wait_for

pytestmark = pytest.mark.slow

LEAD = timedelta(seconds=6)  # time to apply and pause before the instant
FILE = """\
job_types:
  fails:
    handler: tests.handlers.plain:permanent
    max_attempts: 1
  slow:
    handler: tests.handlers.plain:finish_after
  missing:
    handler: tests.handlers.no_such_module:handler
schedules:
  d-fails:
    job_type: fails
    every: 1h
    anchor: {anchor}
    deadline: 5s
  d-slow:
    job_type: slow
    every: 1h
    anchor: {anchor}
    deadline: 3s
    args: {{seconds: 7}}
  d-paused:
    job_type: fails
    every: 1h
    anchor: {anchor}
    deadline: 3s
  d-missing:
    job_type: missing
    every: 1h
    anchor: {anchor}
    deadline: 3s
"""
EXPECTED = {
    "d-fails": ("failed", timedelta(seconds=5)),
    "d-slow": ("not_finished", timedelta(seconds=3)),
    "d-paused": ("paused", timedelta(seconds=3)),
    "d-missing": ("not_finished", timedelta(seconds=3)),
}


def rota(db_url: str, *argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rota.cli.main", *argv, "--db", db_url],
        cwd=REPO_ROOT,
        env=subprocess_env(db_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


class Replicas:
    """``rota scheduler`` processes; whatever is left is killed at the end."""

    def __init__(self, db_url: str, logdir: Path) -> None:
        self.db_url = db_url
        self.logdir = logdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        path = self.logdir / f"scheduler-{len(self.procs)}.log"
        with path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", "scheduler", "--db", self.db_url],
                cwd=REPO_ROOT,
                env=subprocess_env(self.db_url),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        wait_for(
            lambda: "event=scheduler_started" in path.read_text() or proc.poll() is not None,
            timeout=30,
            what="the scheduler to start",
        )
        assert proc.poll() is None, path.read_text()
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.logdir.glob("scheduler-*.log")))

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


@pytest.fixture
def replicas(db_url: str, tmp_path: Path) -> Iterator[Replicas]:
    fleet = Replicas(db_url, tmp_path)
    yield fleet
    fleet.stop_all()


def clock(engine: Engine) -> datetime:
    with engine.begin() as conn:
        return read_clock(conn)


def test_each_missed_deadline_is_recorded_once_with_its_reason_while_a_replica_is_killed(
    db_url: str, tmp_path: Path, replicas: Replicas, executors: Executors
) -> None:
    engine = make_engine(db_url)
    try:
        # The job types and schedules first (their instant a day away), so the
        # executor knows the types from its start; then, with every process up,
        # the instant a few seconds ahead.
        schedule_file = tmp_path / "deadlines.yaml"
        schedule_file.write_text(FILE.format(anchor=utc_key(clock(engine) + timedelta(days=1))))
        rota(db_url, "apply", str(schedule_file))
        victim = replicas.start()
        replicas.start()
        executors.start(ready=True)
        instant = (clock(engine) + LEAD).replace(microsecond=0)
        schedule_file.write_text(FILE.format(anchor=utc_key(instant)))
        apply_file(engine, schedule_file)
        assert pause(engine, "d-paused")
        assert clock(engine) < instant - timedelta(seconds=1), "applying took too long"

        wait_for(lambda: clock(engine) >= instant + timedelta(seconds=1), timeout=30)
        victim.send_signal(signal.SIGKILL)  # between the instant and every deadline
        victim.wait(10)

        def recorded() -> dict[str, object]:
            with engine.connect() as conn:
                return {r["schedule_name"]: r for r in newest_late(conn)}

        wait_for(lambda: len(recorded()) == 4, timeout=30, what="four late records")
        rows = recorded()
        for name, (reason, deadline) in EXPECTED.items():
            row = rows[name]
            assert row["instant"] == instant, name  # type: ignore[index]
            assert row["reason"] == reason, name  # type: ignore[index]
            assert row["deadline"] == instant + deadline, name  # type: ignore[index]
            lag = row["detected_at"] - row["deadline"]  # type: ignore[index]
            assert timedelta(0) <= lag <= timedelta(seconds=5), (name, lag)
        assert rows["d-paused"]["job_id"] is None  # type: ignore[index]
        assert rows["d-missing"]["job_id"] is not None  # type: ignore[index]

        # The slow job succeeds after its deadline: still late, now with its finish time.
        def slow_finished() -> bool:
            with engine.connect() as conn:
                slow = newest_late(conn, schedule="d-slow")
            return len(slow) == 1 and slow[0]["finished_at"] is not None

        wait_for(slow_finished, timeout=30, what="the slow job to succeed")
        with engine.connect() as conn:
            everything = newest_late(conn)
        assert sorted(r["schedule_name"] for r in everything) == sorted(EXPECTED)
        lines = [line for line in replicas.logs().splitlines() if "event=deadline_missed" in line]
        assert sorted(line.split("schedule=")[1].split()[0] for line in lines) == sorted(EXPECTED)
    finally:
        engine.dispose()
