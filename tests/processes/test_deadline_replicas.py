"""Deadlines and their webhooks with real processes: two `rota scheduler` replicas
(one SIGKILLed), an executor, a receiver on a loopback port.

Four schedules fire once, at the same instant a few seconds ahead, each with
a deadline: one whose handler fails, one whose handler is slow (it succeeds
after its deadline), one paused across its instant, and one whose handler
cannot be imported (its job waits in the queue). One replica is SIGKILLed
between the instant and the deadlines. Each schedule gets exactly one late
record with its reason within 5 s of its deadline, one ``deadline_missed``
line over both replicas' logs, and the slow one keeps its record, with its
finish time, once its job succeeds.

The file's ``notifications:`` target sends ``deadline_missed`` and
``job_failed`` to the receiver, its secret in the executor's environment only.
The receiver answers the first POST with a 500, then is down until every
``deadline_missed`` delivery was refused: once it is back it gets, signed with
the secret, one ``deadline_missed`` per late record and one ``job_failed`` for
the failing job, the first POST's ``Rota-Delivery-Id`` again, and nothing twice.
The deliveries retry with the production backoff (5 s, then 10 s, plus up to
20 %): a file may not declare ``rota.*`` job types and `rota apply` stores
``rota.notify`` as rota defines it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from rota.core.database import make_engine
from rota.core.queries.late_occurrences import newest_late
from rota.core.queries.schedules import read_clock
from rota.core.timefmt import utc_key
from rota.operations.schedules import pause
from rota.scheduler.apply import apply_file
from tests.support.executor_support import (
    REPO_ROOT,
    Executors,
    attempt_rows,
    job_row,
    stop_gracefully,
    subprocess_env,
    wait_for,
)
from tests.support.webhook_receiver import ENV, SECRET, Received, Receiver, deliveries

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
notifications:
  ops-hook:
    url: {url}
    events: [deadline_missed, job_failed]
    secret_env: {env}
"""
EXPECTED = {
    "d-fails": ("failed", timedelta(seconds=5)),
    "d-slow": ("not_finished", timedelta(seconds=3)),
    "d-paused": ("paused", timedelta(seconds=3)),
    "d-missing": ("not_finished", timedelta(seconds=3)),
}
JOB_TYPES = {"d-fails": "fails", "d-slow": "slow", "d-paused": "fails", "d-missing": "missing"}


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
        stop_gracefully(self.procs, 15)


@pytest.fixture
def replicas(db_url: str, tmp_path: Path) -> Iterator[Replicas]:
    fleet = Replicas(db_url, tmp_path)
    yield fleet
    fleet.stop_all()


def clock(engine: Engine) -> datetime:
    with engine.begin() as conn:
        return read_clock(conn)


def test_each_missed_deadline_is_recorded_and_posted_once_despite_a_killed_replica_and_receiver(
    db_url: str, tmp_path: Path, replicas: Replicas, executors: Executors, receiver: Receiver
) -> None:
    engine = make_engine(db_url)
    schedule_file = tmp_path / "deadlines.yaml"

    def write(anchor: datetime) -> None:
        schedule_file.write_text(FILE.format(anchor=utc_key(anchor), url=receiver.url, env=ENV))

    try:
        # The job types and schedules first (their instant a day away), so the
        # executor knows the types from its start; then, with every process up,
        # the instant a few seconds ahead.
        write(clock(engine) + timedelta(days=1))
        rota(db_url, "apply", str(schedule_file))
        victim = replicas.start()
        replicas.start()
        # The only process with the secret; polling often, so its job_failed POST is
        # seconds ahead of the first deadline's.
        executors.start("--poll-interval", "0.2", ready=True, env={ENV: SECRET})
        receiver.answers.append(500)  # to the first POST
        instant = (clock(engine) + LEAD).replace(microsecond=0)
        write(instant)
        apply_file(engine, schedule_file)
        assert pause(engine, "d-paused")
        assert clock(engine) < instant - timedelta(seconds=1), "applying took too long"

        # The failing job's job_failed comes first, seconds before any deadline.
        first = wait_for(receiver.all, timeout=30, what="the first POST")[0]
        receiver.down()
        assert first.body["event"] == "job_failed", first.body
        wait_for(lambda: clock(engine) >= instant + timedelta(seconds=1), timeout=30)
        victim.send_signal(signal.SIGKILL)  # between the instant and every deadline
        victim.wait(10)

        rows = _late_records_once_each(engine, instant)
        wait_for(
            lambda: _every_deadline_delivery_refused(engine),
            timeout=30,
            what="every deadline_missed delivery refused by the receiver that is down",
        )
        receiver.up()
        wait_for(
            lambda: len({p.headers["rota-delivery-id"] for p in receiver.ok()}) == 5,
            timeout=40,
            what="every delivery through once the receiver is back",
        )
        _slow_job_keeps_its_record(engine)

        _posts_are_each_event_once_signed(receiver, first, engine)
        _bodies_name_the_late_occurrences(receiver, rows, instant, engine)
        lines = [line for line in replicas.logs().splitlines() if "event=deadline_missed" in line]
        assert sorted(line.split("schedule=")[1].split()[0] for line in lines) == sorted(EXPECTED)
        assert SECRET not in replicas.logs() + executors.logs()
    finally:
        engine.dispose()


def _late_records_once_each(engine: Engine, instant: datetime) -> dict[str, Any]:
    """Each schedule's one late record, with its reason, within 5 s of its deadline."""

    def recorded() -> dict[str, Any]:
        with engine.connect() as conn:
            return {r["schedule_name"]: r for r in newest_late(conn)}

    wait_for(lambda: len(recorded()) == 4, timeout=30, what="four late records")
    rows = recorded()
    for name, (reason, deadline) in EXPECTED.items():
        row = rows[name]
        assert row["instant"] == instant, name
        assert row["reason"] == reason, name
        assert row["deadline"] == instant + deadline, name
        lag = row["detected_at"] - row["deadline"]
        assert timedelta(0) <= lag <= timedelta(seconds=5), (name, lag)
    assert rows["d-paused"]["job_id"] is None
    assert rows["d-missing"]["job_id"] is not None
    return rows


def _every_deadline_delivery_refused(engine: Engine) -> bool:
    late = [d for d in deliveries(engine) if d["args"]["body"]["event"] == "deadline_missed"]
    return len(late) == 4 and all(d["last_error_code"] == "NOTIFY_UNREACHABLE" for d in late)


def _slow_job_keeps_its_record(engine: Engine) -> None:
    """The slow job succeeds after its deadline: still late, now with its finish time."""

    def slow_finished() -> bool:
        with engine.connect() as conn:
            slow = newest_late(conn, schedule="d-slow")
        return len(slow) == 1 and slow[0]["finished_at"] is not None

    wait_for(slow_finished, timeout=30, what="the slow job to succeed")
    with engine.connect() as conn:
        everything = newest_late(conn)
    assert sorted(r["schedule_name"] for r in everything) == sorted(EXPECTED)


def _posts_are_each_event_once_signed(receiver: Receiver, first: Received, engine: Engine) -> None:
    """Every POST verifies; each delivery got through once; the one answered 500
    came again with the same id and bytes; none was lost."""
    wait_for(
        lambda: all(d["state"] == "SUCCEEDED" for d in deliveries(engine)),
        timeout=15,
        what="every delivery SUCCEEDED",
    )
    posts = receiver.all()
    assert posts[0] is first and first.status == 500
    for p in posts:
        assert p.signed_with(SECRET) and not p.signed_with(SECRET + "x")
        assert p.headers["rota-event"] == p.body["event"]
        assert p.body["delivery_id"] == p.headers["rota-delivery-id"]
        assert p.body["target"] == "ops-hook"
    through = Counter(p.headers["rota-delivery-id"] for p in receiver.ok())
    assert set(through.values()) == {1}, through
    rows = deliveries(engine)
    assert set(through) == {str(d["job_id"]) for d in rows} and len(rows) == 5
    (again,) = [p for p in receiver.ok() if p.raw == first.raw]
    assert again.headers["rota-delivery-id"] == first.headers["rota-delivery-id"]
    first_id = next(d["job_id"] for d in rows if str(d["job_id"]) == again.body["delivery_id"])
    attempts = [(a["outcome"], a["error_code"]) for a in attempt_rows(engine, first_id)]
    assert attempts[0] == ("RETRY", "500") and attempts[-1] == ("SUCCEEDED", None), attempts
    assert all(SECRET not in repr(d) for d in rows)


def _bodies_name_the_late_occurrences(
    receiver: Receiver, rows: dict[str, Any], instant: datetime, engine: Engine
) -> None:
    """One deadline_missed per late record, and the failing job's job_failed, each
    naming its schedule, instant, reason, job and job type, its link the job's."""
    ok = [p.body for p in receiver.ok()]
    late = [b for b in ok if b["event"] == "deadline_missed"]
    assert sorted(b["schedule"] for b in late) == sorted(EXPECTED)
    for body in late:
        name = body["schedule"]
        job_id = rows[name]["job_id"]
        assert body == {
            "event": "deadline_missed",
            "schedule": name,
            "instant": utc_key(instant),
            "job_id": str(job_id) if job_id is not None else None,
            "job_type": JOB_TYPES[name],
            "state": None,
            "error_code": None,
            "reason": rows[name]["reason"],
            "job_url": f"/jobs/{job_id}" if job_id is not None else None,
            "target": "ops-hook",
            "delivery_id": body["delivery_id"],
            "occurred_at": utc_key(rows[name]["detected_at"]),
        }, name
        if job_id is not None:  # the link names the occurrence's own job
            job = job_row(engine, job_id)
            assert (job["schedule_name"], job["scheduled_for"]) == (name, instant), name
    failing = rows["d-fails"]["job_id"]
    (failed,) = [b for b in ok if b["event"] == "job_failed"]
    assert failed == {
        "event": "job_failed",
        "schedule": "d-fails",
        "instant": utc_key(instant),
        "job_id": str(failing),
        "job_type": "fails",
        "state": "FAILED",
        "error_code": "BAD_INPUT",
        "reason": None,
        "job_url": f"/jobs/{failing}",
        "target": "ops-hook",
        "delivery_id": failed["delivery_id"],
        "occurred_at": failed["occurred_at"],
    }
