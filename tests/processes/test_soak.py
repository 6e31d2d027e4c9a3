"""The chaos soak (bench/soak.py): a short run passes, and every check can fail.

The soak test (markers ``slow`` and ``soak``) runs the soak's CI form
(``--minutes 0.75``: about 70 s in all) and asserts exit 0 and each printed
check; ``ROTA_SOAK_MINUTES=60 pytest -m soak`` runs a long one with the same
assertions. The others feed each check of
``bench/soak_checks.py`` a fabricated bad case on both backends -- a duplicated
occurrence, a missing one, a job left RUNNING, a lost commit, two attempts held
at once, a success from a stale generation, an attempt over the budget, a
process that stopped working, a traceback in a log -- and assert that it is
reported, so the soak cannot pass vacuously.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, update

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
)
from rota.core.tables import job_attempts, jobs, schedule_skips, schedules, workers
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)

CHECKS = [
    "the ad-hoc load and cancels ran to the end",
    "no process wedged",
    "every process answers /healthz 200",
    "every process stops cleanly on SIGTERM (chaos and end)",
    "no running process died on its own",
    "every occurrence exactly one job",
    "no job lost",
    "nothing committed lost",
    "no stale generation, no overlapping attempts",
    "attempts never above max_attempts",
    "no traceback in any log",
    "executors recovered after each outage",
    "schedulers recovered after each outage",
]


SOAK_MINUTES = float(os.environ.get("ROTA_SOAK_MINUTES", "0.75"))  # 0.75: the CI form


@pytest.mark.slow
@pytest.mark.soak
def test_the_soak_passes_every_check() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--minutes", str(SOAK_MINUTES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600 + SOAK_MINUTES * 60 * 2,
        check=False,
    )
    out = done.stdout + done.stderr
    print(out)  # the figures: shown by pytest -rP (or -s)
    assert done.returncode == 0, out
    for name in CHECKS:
        assert f"[ok  ] {name}:" in out, f"{name!r} not passed:\n{out}"
    assert "[FAIL]" not in out
    assert "soak passed" in out
    signals = re.search(r"signals: (\d+) ", out)
    assert signals is not None and int(signals.group(1)) >= 5, out
    assert len(re.findall(r"^outage \d \(restart\): down", out, re.M)) == 2, out
    assert re.search(r"^attempts: \d+; .*LEASE_EXPIRED", out, re.M), out  # the sweeper worked
    # the window held occurrences, and jobs ran: nothing checked was empty
    window = re.search(r"every occurrence exactly one job: (\d+) occurrences", out)
    assert window is not None and int(window.group(1)) > 100, out


# -- each check fails on a fabricated bad case -------------------------------------

SCHEDULES = """\
job_types:
  t:
    handler: bench.soak_handlers:ok
schedules:
  tick:
    job_type: t
    every: 1s
    misfire: catch_up
"""


def _apply(engine: Engine) -> Any:
    sf = load_schedule_text(SCHEDULES, now=T0)
    apply_schedule_file(engine, sf, now=T0)
    with engine.begin() as conn:  # applied at T0 (apply stamps the database clock)
        conn.execute(update(schedules).values(created_at=T0))
    return sf.schedules


def _job(engine: Engine, **values: Any) -> uuid.UUID:
    job_id = values.pop("job_id", None) or uuid.uuid4()
    row = {
        "job_id": job_id,
        "job_type": "t",
        "state": "SUCCEEDED",
        "run_after": T0,
        "created_at": T0,
        "updated_at": T0,
        **values,
    }
    with engine.begin() as conn:
        conn.execute(insert(jobs).values(**row))
    return job_id


def _attempt(
    engine: Engine,
    job_id: uuid.UUID,
    gen: int,
    start: int,
    end: int | None,
    outcome: str | None,
    worker: str = "w1",
    number: int | None = None,
) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(job_attempts).values(
                job_id=job_id,
                attempt=gen if number is None else number,
                lease_generation=gen,
                worker_id=worker,
                started_at=T0 + start * S,
                ended_at=None if end is None else T0 + end * S,
                outcome=outcome,
            )
        )


def _occurrence(engine: Engine, k: int, key: str | None = None) -> None:
    instant = T0 + k * S
    _job(
        engine,
        schedule_name="tick",
        scheduled_for=instant,
        dedup_key=key or f"tick@{instant:%Y-%m-%dT%H:%M:%SZ}",
    )


def _violations(check: Check, *needles: str) -> None:
    assert not check.ok, check.render()
    text = "\n".join(check.violations)
    for needle in needles:
        assert needle in text, check.render()


def test_occurrences_one_each_passes(engine: Engine) -> None:
    specs = _apply(engine)
    for k in range(1, 11):
        _occurrence(engine, k)
    with engine.connect() as conn:
        check = check_occurrences(conn, specs, T0 + 10 * S)
    assert check.ok, check.render()
    assert "10 occurrences in the window, 10 with one job" in check.summary


def test_a_duplicated_occurrence_is_reported(engine: Engine) -> None:
    specs = _apply(engine)
    for k in range(1, 11):
        _occurrence(engine, k)
    _occurrence(engine, 4, key="a-second-key-for-the-same-instant")
    with engine.connect() as conn:
        _violations(
            check_occurrences(conn, specs, T0 + 10 * S),
            "tick@2026-01-01T00:00:04.000Z: 2 jobs (duplicated)",
        )


def test_a_missing_occurrence_is_reported_unless_a_skip_records_it(engine: Engine) -> None:
    specs = _apply(engine)
    for k in (*range(1, 6), *range(7, 11)):
        _occurrence(engine, k)
    with engine.connect() as conn:
        _violations(
            check_occurrences(conn, specs, T0 + 10 * S),
            "tick@2026-01-01T00:00:06.000Z: no job and no skip record",
        )
    with engine.begin() as conn:
        conn.execute(
            insert(schedule_skips).values(
                schedule_name="tick",
                reason="misfire",
                first_instant=T0 + 6 * S,
                last_instant=T0 + 6 * S,
                count=1,
                recorded_at=T0 + 7 * S,
            )
        )
    with engine.connect() as conn:
        check = check_occurrences(conn, specs, T0 + 10 * S)
    assert check.ok, check.render()
    assert "1 skipped by policy" in check.summary


def test_an_empty_window_and_an_unknown_instant_are_reported(engine: Engine) -> None:
    specs = _apply(engine)
    with engine.connect() as conn:
        _violations(check_occurrences(conn, specs, T0), "no occurrence fell in the window")
    _occurrence(engine, 1)
    _occurrence(engine, 2)
    _job(engine, schedule_name="tick", scheduled_for=T0 + 1.5 * S, dedup_key="odd")
    with engine.connect() as conn:
        _violations(check_occurrences(conn, specs, T0 + 2 * S), "the rule does not produce")


def test_a_job_left_running_or_due_and_never_run_is_lost(engine: Engine) -> None:
    at = T0 + 60 * S
    _job(engine, state="RETRY_WAIT", run_after=at + 5 * S, attempt_count=1)  # a reason
    released = _job(engine, state="QUEUED")
    _attempt(engine, released, 1, 0, 1, "RELEASED")  # a reason
    with engine.connect() as conn:
        assert check_settled(conn, at).ok
    held = _job(engine, state="RUNNING", lease_owner="w9", lease_expires_at=at, attempt_count=1)
    due = _job(engine, state="QUEUED")
    with engine.connect() as conn:
        _violations(
            check_settled(conn, at),
            f"job {held} (t): still RUNNING, held by w9",
            f"job {due} (t): QUEUED, due since",
        )


def test_a_committed_job_that_is_gone_is_reported(engine: Engine) -> None:
    kept = _job(engine)
    gone = uuid.uuid4()
    with engine.connect() as conn:
        assert check_committed(conn, [kept]).ok
        _violations(check_committed(conn, [kept, gone]), f"job {gone}: enqueue committed")


def test_a_finished_job_whose_outcome_changed_after_failover_is_reported(
    engine: Engine,
) -> None:
    job = _job(engine, state="QUEUED")
    with engine.connect() as conn:
        _violations(
            check_terminal_kept(conn, {job: "SUCCEEDED"}, "the failover"),
            "SUCCEEDED before the failover, QUEUED after",
        )


def test_generations_in_order_pass(engine: Engine) -> None:
    job = _job(engine, lease_generation=3, attempt_count=2)
    _attempt(engine, job, 1, 0, 10, "LEASE_EXPIRED")
    _attempt(engine, job, 2, 11, 12, "RELEASED")
    _attempt(engine, job, 3, 13, 14, "SUCCEEDED")
    with engine.connect() as conn:
        check = check_generations(conn)
    assert check.ok, check.render()


def test_two_attempts_held_at_once_are_reported(engine: Engine) -> None:
    job = _job(engine, lease_generation=2, attempt_count=2)
    _attempt(engine, job, 1, 0, 20, "LEASE_EXPIRED")
    _attempt(engine, job, 2, 11, 25, "SUCCEEDED")
    with engine.connect() as conn:
        _violations(check_generations(conn), "generation 1 held until", "(overlap)")


def test_a_success_written_by_a_stale_generation_is_reported(engine: Engine) -> None:
    job = _job(engine, state="FAILED", lease_generation=2, attempt_count=2)
    _attempt(engine, job, 1, 0, 5, "SUCCEEDED", worker="stale")
    _attempt(engine, job, 2, 6, 8, "FAILED")
    with engine.connect() as conn:
        _violations(check_generations(conn), "generation 1 (stale) wrote SUCCEEDED")


def test_an_attempt_newer_than_the_job_or_an_outcome_that_disagrees_is_reported(
    engine: Engine,
) -> None:
    ahead = _job(engine, lease_generation=1, attempt_count=1)
    _attempt(engine, ahead, 1, 0, 1, "SUCCEEDED")
    _attempt(engine, ahead, 2, 2, 3, "SUCCEEDED")
    disagrees = _job(engine, state="SUCCEEDED", lease_generation=1, attempt_count=1)
    _attempt(engine, disagrees, 1, 0, 1, "FAILED")
    with engine.connect() as conn:
        _violations(
            check_generations(conn),
            "newest attempt has generation 2, the job 1",
            f"job {disagrees} (t): SUCCEEDED, but its newest attempt",
        )


def test_attempts_above_max_attempts_are_reported(engine: Engine) -> None:
    job = _job(engine, state="FAILED", lease_generation=4, attempt_count=2, max_attempts=2)
    _attempt(engine, job, 1, 0, 1, "RETRY")
    _attempt(engine, job, 2, 2, 3, "RELEASED", number=2)  # refunded: does not count
    _attempt(engine, job, 3, 4, 5, "RETRY", number=2)
    with engine.connect() as conn:
        assert check_attempt_budget(conn).ok
    _attempt(engine, job, 4, 6, 7, "FAILED", number=3)
    with engine.connect() as conn:
        _violations(
            check_attempt_budget(conn),
            "3 attempts cost an attempt, max_attempts 2",
            "an attempt numbered 3 > max_attempts 2",
        )


def _worker(engine: Engine, pid: int, kind: str, seen: datetime) -> str:
    worker_id = f"host:{pid}:x"
    with engine.begin() as conn:
        conn.execute(
            insert(workers).values(
                worker_id=worker_id,
                kind=kind,
                host="host",
                pid=pid,
                version="0",
                started_at=T0,
                last_seen_at=seen,
                interval_seconds=1.0,
            )
        )
    return worker_id


def test_a_wedged_or_missing_process_is_reported(engine: Engine) -> None:
    since = T0 + 10 * S
    _worker(engine, 101, "scheduler", since + S)
    working = _worker(engine, 102, "executor", since + S)
    _worker(engine, 103, "scheduler", since - S)  # stopped refreshing its row
    _worker(engine, 104, "executor", since + S)  # refreshes, claims nothing
    _attempt(engine, _job(engine, lease_generation=1), 1, 11, 12, "SUCCEEDED", worker=working)
    procs = [
        ("scheduler", 101),
        ("executor", 102),
        ("scheduler", 103),
        ("executor", 104),
        ("executor", 105),
    ]
    with engine.connect() as conn:
        claimed = claims_since(conn, [102, 104, 105], since)
        assert dict(claimed) == {102: 1}
        _violations(
            check_live(conn, procs, since, claimed),
            "scheduler pid 103 (host:103:x): last seen",
            "executor pid 104 (host:104:x): claimed nothing",
            "executor pid 105: no row in the workers table",
        )
        assert check_live(conn, procs[:2], since, claimed).ok


def test_a_traceback_in_a_log_is_reported(tmp_path: Path) -> None:
    clean = tmp_path / "executor-0-1.log"
    clean.write_text("INFO rota.executor event=executor_started\n")
    assert check_logs([clean]).ok
    bad = tmp_path / "scheduler-2-3.log"
    bad.write_text(
        "INFO rota.scheduler event=scheduler_started\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ZeroDivisionError: division by zero\n"
    )
    _violations(check_logs([clean, bad]), "scheduler-2-3.log:2: ZeroDivisionError")


def test_no_recovery_after_an_outage_is_reported() -> None:
    assert check_recovered("executors", [0.4, 1.2], 60).ok
    _violations(check_recovered("executors", [0.4, None], 60), "outage 2: no recovery")
    _violations(check_recovered("executors", [75.0], 60), "outage 1: 75.0s")
