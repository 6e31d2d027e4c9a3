"""Real scheduler processes, SIGKILLed and restarted at random: one job per occurrence.

Several ``rota scheduler`` replicas run against one database with a per-second
schedule (catch_up, with a grace and a window larger than any kill gap). While
they run, replicas are killed with SIGKILL and restarted at random. Afterwards
every second between the first and the last occurrence has exactly one job.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from rota.core.config import MisfirePolicy
from rota.core.queries.schedules import read_clock
from rota.core.tables import jobs
from tests.support.scheduler_helpers import apply_specs, schedule_row, spec

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 14.0


class Replica:
    def __init__(self, db_url: str, log_dir: Path, index: int) -> None:
        self.db_url = db_url
        self.log_dir = log_dir
        self.index = index
        self.starts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = log_dir / "unused.log"

    def start(self) -> None:
        self.starts += 1
        path = self.log_path = self.log_dir / f"replica-{self.index}-{self.starts}.log"
        log = path.open("wb")
        argv = ["scheduler", "--db", self.db_url, "--max-sleep", "0.2"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rota.cli.main", *argv],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        log.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def wait_started(self, timeout: float = 20) -> None:
        """Until the replica logs that it runs (its signal handlers are installed)."""
        deadline = time.monotonic() + timeout
        while b"event=scheduler_started" not in self.log_path.read_bytes():
            assert self.proc is not None and self.proc.poll() is None, "the replica died"
            assert time.monotonic() < deadline, "the replica did not start"
            time.sleep(0.05)

    def stop(self) -> int:
        assert self.proc is not None
        self.wait_started()
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(jobs)).scalar_one())


def _chaos(db_url: str, engine: Engine, tmp_path: Path, replicas: int) -> None:
    seed = int(os.environ.get("ROTA_CHAOS_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"chaos seed {seed}")
    apply_specs(
        engine,
        spec(
            "tick",
            every=timedelta(seconds=1),
            misfire=MisfirePolicy.CATCH_UP,
            grace=timedelta(minutes=10),
            catch_up_window=timedelta(hours=1),
        ),
        now=None,
    )
    fleet = [Replica(db_url, tmp_path, i) for i in range(replicas)]
    for r in fleet:
        r.start()
    started = time.monotonic()
    kills = 0
    while time.monotonic() - started < RUN_SECONDS:
        time.sleep(rng.uniform(0.3, 1.5))
        victim = rng.choice(fleet)
        victim.kill()
        kills += 1
        time.sleep(rng.uniform(0.0, 1.0))
        victim.start()
    # Let the survivors catch up with everything due, then stop them cleanly.
    deadline = time.monotonic() + 30
    while True:
        row = schedule_row(engine, "tick")
        with engine.begin() as conn:
            now = read_clock(conn)
        if row["cursor_at"] is not None and now - row["cursor_at"] < timedelta(seconds=2):
            break
        assert time.monotonic() < deadline, "the replicas did not catch up"
        time.sleep(0.2)
    codes = [r.stop() for r in fleet]
    assert codes == [0] * replicas, codes
    assert kills >= 5

    with engine.connect() as conn:
        rows = conn.execute(
            select(jobs.c.scheduled_for, jobs.c.dedup_key).order_by(jobs.c.scheduled_for)
        ).all()
    instants = [r.scheduled_for for r in rows]
    keys = [r.dedup_key for r in rows]
    assert len(set(keys)) == len(keys), "a duplicate dedup key"
    assert len(set(instants)) == len(instants), "two jobs for one occurrence"
    assert len(instants) >= RUN_SECONDS - 2
    expected = [instants[0] + timedelta(seconds=i) for i in range(len(instants))]
    assert instants == expected, "an occurrence is missing"
    final = schedule_row(engine, "tick")
    assert final["cursor_at"] == instants[-1]
    assert final["skipped_count"] == 0 and final["coalesced_count"] == 0
    assert _count(engine) == len(instants)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_three_replicas_on_postgresql_killed_at_random(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    _chaos(db_url, engine, tmp_path, replicas=3)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_two_replicas_on_sqlite_killed_at_random(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    _chaos(db_url, engine, tmp_path, replicas=2)
