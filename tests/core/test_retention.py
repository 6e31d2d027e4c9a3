"""Retention: finished jobs pruned by age and state, never an occurrence made twice."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select, text

from rota.cli.main import main
from rota.core.config import JobTypeSpec, Retention
from rota.core.queries.jobs_control import request_cancel
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.queries.jobs_prune import (
    PruneRule,
    count_prunable,
    fold_old_skips,
    prune_finished_batch,
)
from rota.core.queries.late_occurrences import prune_old_late
from rota.core.queries.schedule_skips import latest_by_reason, totals_by_reason
from rota.core.retention import LATE_RETAIN
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import job_attempts, jobs, late_occurrences, schedule_skips
from rota.executor.service import Executor
from rota.operations.schedules import backfill, pause, resume, trigger
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.loader import load_schedule_text
from rota.scheduler.service import SchedulerService
from tests.support.executor_support import (
    add_jobs,
    claim_as,
    job_type,
    run_in_thread,
    store_types,
    wait_for,
)
from tests.support.scheduler_helpers import MIN, T0, apply_specs, jobs_of, schedule_row, spec

DAY = timedelta(days=1)

# -- the schedule file -------------------------------------------------------------


FILE = """\
defaults:
  retain: {succeeded: 2d, failed: forever}
job_types:
  plain:
    handler: m:f
  own:
    handler: m:f
    retain:
      failed: 90d
      cancelled: 12h
schedules: {}
"""


def test_retain_is_read_per_job_type_with_defaults_merged_key_by_key() -> None:
    sf = load_schedule_text(FILE, "f.yaml")
    assert sf.job_types["plain"].retain == Retention(
        succeeded=2 * DAY, cancelled=7 * DAY, failed=None
    )
    assert sf.job_types["own"].retain == Retention(
        succeeded=2 * DAY, cancelled=timedelta(hours=12), failed=90 * DAY
    )
    no_retain = load_schedule_text("job_types:\n  x:\n    handler: m:f\n", "g.yaml")
    assert no_retain.job_types["x"].retain == Retention(7 * DAY, 7 * DAY, 30 * DAY)


def test_retain_round_trips_through_the_stored_json_and_old_json_gets_defaults() -> None:
    spec_ = JobTypeSpec(name="x", handler="m:f", retain=Retention(DAY, None, 3 * DAY))
    stored = spec_.to_json()
    assert stored["retain"] == {"succeeded": "1d", "cancelled": "forever", "failed": "3d"}
    assert JobTypeSpec.from_json(stored) == spec_
    old = {k: v for k, v in stored.items() if k != "retain"}  # stored before retention existed
    assert JobTypeSpec.from_json(old).retain == Retention()
    assert JobTypeSpec.from_json(old) == JobTypeSpec(name="x", handler="m:f")


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("    retain: {succeeded: 0s}\n", 4, "'own', retain.succeeded: must be longer than 0s"),
        ("    retain: {failed: soon}\n", 4, "retain.failed: bad duration 'soon'"),
        ("    retain: {failed: 3}\n", 4, "(or forever)"),
        ("    retain:\n      kept: 1d\n", 5, "unknown key 'kept'"),
        ("    retain: 7d\n", 4, "retain: expected a mapping"),
    ],
)
def test_bad_retain_values_are_refused_with_file_and_line(
    body: str, line: int, message: str
) -> None:
    text_ = "job_types:\n  own:\n    handler: m:f\n" + body
    with pytest.raises(ConfigError) as err:
        load_schedule_text(text_, "f.yaml")
    shown = [str(p) for p in err.value.problems]
    assert any(p.startswith(f"f.yaml:{line}:") and message in p for p in shown), shown


def test_bad_retain_under_defaults_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        load_schedule_text("defaults:\n  retain: {succeeded: -1d}\n", "f.yaml")
    assert str(err.value.problems[0]).startswith("f.yaml:2:")


# -- pruning -------------------------------------------------------------------------


def finish(engine: Engine, ids: Sequence[uuid.UUID], state: JobState, at: datetime) -> None:
    """Claim ``ids`` and write their outcome, both at the injected instant ``at``."""
    claimed = {c.job_id: c for c in claim_as(engine, "w", 10_000, ("default", "p1"), now=at)}
    outcome = AttemptOutcome.SUCCEEDED if state is JobState.SUCCEEDED else AttemptOutcome.FAILED
    finishes = [
        Finish(
            i,
            claimed[i].lease_generation,
            state,
            outcome,
            error_code=None if state is JobState.SUCCEEDED else "BOOM",
            needs_reconcile=False if state is JobState.SUCCEEDED else None,
        )
        for i in ids
    ]
    with engine.begin() as conn:
        finish_if_lease_held(conn, owner="w", finishes=finishes, now=at)


def count(engine: Engine, table: object = jobs) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def prune_all(engine: Engine, rule: PruneRule, now: datetime, limit: int = 1000) -> int:
    total = 0
    while True:
        with engine.begin() as conn:
            n = prune_finished_batch(conn, rule, limit=limit, now=now).jobs
        total += n
        if n < limit:
            return total


def test_prune_takes_old_finished_jobs_of_the_state_with_their_attempts(engine: Engine) -> None:
    t = job_type("t")
    store_types(engine, t)
    old = add_jobs(engine, t, 3, run_after=T0 - DAY)
    finish(engine, old, JobState.SUCCEEDED, T0)
    recent = add_jobs(engine, t, 2, run_after=T0 - DAY)
    finish(engine, recent, JobState.SUCCEEDED, T0 + 5 * DAY)
    failed = add_jobs(engine, t, 1, run_after=T0 - DAY)
    finish(engine, failed, JobState.FAILED, T0)
    waiting = add_jobs(engine, t, 1, run_after=T0 + 30 * DAY)  # never pruned, however old
    assert count(engine, job_attempts) == 6
    rule = PruneRule("SUCCEEDED", "t", 7 * DAY)
    now = T0 + 8 * DAY
    with engine.connect() as conn:
        assert count_prunable(conn, rule, now) == 3
    with engine.begin() as conn:
        pruned = prune_finished_batch(conn, rule, limit=2, now=now)  # bounded
    assert (pruned.jobs, pruned.attempts) == (2, 2)
    assert prune_all(engine, rule, now) == 1
    with engine.connect() as conn:
        left = set(conn.execute(select(jobs.c.job_id)).scalars())
        attempts_left = set(conn.execute(select(job_attempts.c.job_id)).scalars())
    assert left == {*recent, *failed, *waiting}
    assert attempts_left == {*recent, *failed}
    # another job type's rule takes nothing of "t"
    assert prune_all(engine, PruneRule("SUCCEEDED", "other", timedelta(0)), now) == 0


def test_cancelled_jobs_are_pruned_by_their_cancel_time(engine: Engine) -> None:
    t = job_type("t")
    store_types(engine, t)
    (job,) = add_jobs(engine, t, 1)
    with engine.begin() as conn:
        request_cancel(conn, job, now=T0)
    rule = PruneRule("CANCELLED", "t", 7 * DAY)
    assert prune_all(engine, rule, T0 + 6 * DAY) == 0
    assert prune_all(engine, rule, T0 + 8 * DAY) == 1


def test_a_rule_for_an_unfinished_state_is_refused() -> None:
    with pytest.raises(ValueError, match="only finished jobs"):
        PruneRule("QUEUED", "t", DAY)


def test_postgresql_pruners_skip_rows_another_one_holds(pg_engine: Engine) -> None:
    """SKIP LOCKED is PostgreSQL's; on SQLite the write lock serialises pruners."""
    engine = pg_engine
    t = job_type("t")
    store_types(engine, t)
    ids = add_jobs(engine, t, 4, run_after=T0 - DAY)
    finish(engine, ids, JobState.SUCCEEDED, T0)
    rule = PruneRule("SUCCEEDED", "t", DAY)
    with engine.connect() as holder:
        first = holder.begin()
        holder.execute(text("SET LOCAL lock_timeout = '2s'"))
        a = prune_finished_batch(holder, rule, limit=2, now=T0 + 2 * DAY)
        # while the first holds its two rows, a second pruner takes the other two, at once
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '2s'"))
            b = prune_finished_batch(conn, rule, limit=10, now=T0 + 2 * DAY)
        first.commit()
    assert (a.jobs, b.jobs) == (2, 2)
    assert count(engine) == 0


# -- occurrences are never made twice --------------------------------------------------


def run_and_finish_schedule(engine: Engine, until: datetime) -> list[datetime]:
    """Materialise ``s`` up to ``until`` and finish every job made, at ``until``."""
    SchedulerService(engine).run_once(until)
    made = jobs_of(engine)
    finish(engine, [j["job_id"] for j in made], JobState.SUCCEEDED, until)
    return [j["scheduled_for"] for j in made]


def test_pruned_occurrences_are_never_made_again_by_the_scheduler_or_backfill(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from rota.core.config import MisfirePolicy

    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP))
    made = run_and_finish_schedule(engine, T0 + 5 * MIN)
    assert made == [T0 + i * MIN for i in range(1, 6)]
    rule = PruneRule("SUCCEEDED", "work", DAY)
    later = T0 + 5 * MIN + 2 * DAY
    with engine.begin() as conn:
        pruned = prune_finished_batch(conn, rule, now=later)
    assert pruned.jobs == 5 and pruned.watermarks == {"s": T0 + 5 * MIN}
    assert schedule_row(engine)["pruned_through"] == T0 + 5 * MIN
    assert jobs_of(engine) == []
    # The scheduler's cursor is past them: a tick at the same instant makes nothing.
    assert SchedulerService(engine).run_once(T0 + 5 * MIN + timedelta(seconds=1)).created == 0
    # A backfill over the pruned range makes nothing and says why.
    result = backfill(engine, "s", T0 + MIN, T0 + 5 * MIN + timedelta(seconds=1))
    assert (result.created, result.existing, result.pruned) == (0, 0, 5)
    assert jobs_of(engine) == []
    # ... but makes what lies after the watermark (here: 00:06, never made before);
    # 00:00 was never made (before the schedule existed), but lies below the watermark.
    # The dry run says so too, instead of promising what the real run leaves out.
    span = ["s", "--from", "2026-03-02T00:00:00Z", "--to", "2026-03-02T00:06:30Z"]
    assert main(["backfill", *span, "--dry-run", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "7 occurrences" in out, out
    assert "6 at or before 2026-03-02T00:05:00Z" in out and "left out" in out, out
    assert main(["backfill", *span, "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "1 created" in out and "6 left out (at or before" in out, out
    assert "2026-03-02T00:05:00Z" in out
    assert [j["scheduled_for"] for j in jobs_of(engine)] == [T0 + 6 * MIN]


def test_a_dry_run_cut_short_by_max_says_at_least_of_what_it_leaves_out(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule walked one occurrence at a time (an exclusion) stops at ``--max``:
    the occurrences it counted were all at or before the watermark, and more
    may be, so the count of those left out is a lower bound, and says so."""
    from datetime import date

    from rota.core.config import MisfirePolicy
    from rota.operations.schedules import count_backfill

    walked = spec(
        every=None,
        cron="* * * * *",
        exclude_dates=(date(2026, 1, 1),),
        misfire=MisfirePolicy.CATCH_UP,
    )
    apply_specs(engine, walked)
    run_and_finish_schedule(engine, T0 + 5 * MIN)
    with engine.begin() as conn:
        prune_finished_batch(conn, PruneRule("SUCCEEDED", "work", DAY), now=T0 + 3 * DAY)
    counted = count_backfill(engine, "s", T0, T0 + 6 * MIN + timedelta(seconds=30), limit=3)
    assert (counted.count, counted.exact, counted.pruned) == (4, False, 4)
    assert not counted.pruned_exact
    whole = count_backfill(engine, "s", T0, T0 + 6 * MIN + timedelta(seconds=30))
    assert (whole.count, whole.exact, whole.pruned, whole.pruned_exact) == (7, True, 6, True)
    span = ["s", "--from", "2026-03-02T00:00:00Z", "--to", "2026-03-02T00:06:30Z"]
    assert main(["backfill", *span, "--dry-run", "--max", "3", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "more than 4 occurrences" in out, out
    assert "at least 4 at or before 2026-03-02T00:05:00Z" in out, out
    assert main(["backfill", *span, "--dry-run", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "  6 at or before 2026-03-02T00:05:00Z" in out and "at least" not in out, out


def test_a_dry_run_whose_second_count_stops_at_max_says_at_least(engine: Engine) -> None:
    # A cron rule counted by its period (one a day here) over the whole range, but
    # walked one by one up to the watermark when that lies within three periods.
    from rota.operations.schedules import count_backfill

    apply_specs(engine, spec(every=None, cron="* 3 * * *"))
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE schedules SET pruned_through = :t"),
            {"t": T0 + 2 * DAY + timedelta(hours=3, minutes=59)},
        )
    end = T0 + 10 * DAY
    cut = count_backfill(engine, "s", T0, end, limit=100, now=end)
    assert (cut.count, cut.exact) == (600, True)
    assert (cut.pruned, cut.pruned_exact) == (101, False)  # 180 in fact: "at least 101"
    whole = count_backfill(engine, "s", T0, end, limit=1000, now=end)
    assert (whole.pruned, whole.pruned_exact) == (180, True)


def test_a_scheduled_job_ahead_of_its_paused_schedule_cursor_is_kept(engine: Engine) -> None:
    from rota.core.config import MisfirePolicy

    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP, catch_up_window=30 * DAY))
    pause(engine, "s", now=T0)
    # Backfilled while paused: ahead of the cursor, which stays at T0.
    backfill(engine, "s", T0 + MIN, T0 + 3 * MIN)
    finish(engine, [j["job_id"] for j in jobs_of(engine)], JobState.SUCCEEDED, T0 + 3 * MIN)
    rule = PruneRule("SUCCEEDED", "work", DAY)
    now = T0 + 10 * DAY
    with engine.connect() as conn:
        assert count_prunable(conn, rule, now) == 0  # resume would otherwise make them again
    resume(engine, "s", now=T0 + 3 * MIN + timedelta(seconds=1))
    assert len(jobs_of(engine)) == 3  # the two done, and 00:03 made by the resume
    with engine.connect() as conn:
        assert count_prunable(conn, rule, now) == 2  # the cursor has passed them now


def test_manual_runs_are_pruned_without_moving_the_watermark(engine: Engine) -> None:
    apply_specs(engine, spec())
    pause(engine, "s", now=T0)
    run = trigger(engine, "s", now=T0 + 10 * MIN)  # ahead of the paused cursor
    finish(engine, [run.job_id], JobState.SUCCEEDED, T0 + 10 * MIN)
    with engine.begin() as conn:
        pruned = prune_finished_batch(conn, PruneRule("SUCCEEDED", "work", DAY), now=T0 + 2 * DAY)
    assert pruned.jobs == 1 and pruned.watermarks == {}
    assert schedule_row(engine)["pruned_through"] is None


# -- the skip ledger ---------------------------------------------------------------------


def test_old_skip_ledger_rows_fold_into_one_keeping_totals_and_the_newest(engine: Engine) -> None:
    apply_specs(engine, spec(), spec("other"))
    rows = [
        # (schedule, reason, first minute, count, recorded at)
        ("s", "misfire", 1, 3, T0),
        ("s", "misfire", 10, 2, T0 + DAY),
        ("s", "misfire", 20, 4, T0 + 2 * DAY),
        ("s", "misfire", 30, 1, T0 + 40 * DAY),  # recent
        ("s", "misfire", 40, 5, T0 + 41 * DAY),  # the newest
        ("s", "dst", 50, 1, T0),  # one old row and nothing else: nothing to fold
        ("other", "paused", 1, 7, T0),
        ("other", "paused", 2, 8, T0 + DAY),  # old, but the newest of its group
    ]
    with engine.begin() as conn:
        conn.execute(
            insert(schedule_skips),
            [
                {
                    "schedule_name": name,
                    "reason": reason,
                    "first_instant": T0 + first * MIN,
                    "last_instant": T0 + (first + n - 1) * MIN,
                    "count": n,
                    "job_id": None,
                    "recorded_at": at,
                }
                for name, reason, first, n, at in rows
            ],
        )
        before = totals_by_reason(conn)
        latest_before = latest_by_reason(conn)
    now = T0 + 42 * DAY
    with engine.begin() as conn:
        assert fold_old_skips(conn, timedelta(days=30), now=now) == 2
    with engine.begin() as conn:
        assert fold_old_skips(conn, timedelta(days=30), now=now) == 0  # idempotent
        assert totals_by_reason(conn) == before
        latest = latest_by_reason(conn)
        left = conn.execute(
            select(
                schedule_skips.c.count,
                schedule_skips.c.first_instant,
                schedule_skips.c.last_instant,
            )
            .where(schedule_skips.c.schedule_name == "s", schedule_skips.c.reason == "misfire")
            .order_by(schedule_skips.c.skip_id)
        ).all()
    assert [tuple(r) for r in left] == [
        (9, T0 + MIN, T0 + 23 * MIN),  # the three old rows, folded
        (1, T0 + 30 * MIN, T0 + 30 * MIN),
        (5, T0 + 40 * MIN, T0 + 44 * MIN),
    ]
    assert {n: {r: row["skip_id"] for r, row in v.items()} for n, v in latest.items()} == {
        n: {r: row["skip_id"] for r, row in v.items()} for n, v in latest_before.items()
    }
    assert count(engine, schedule_skips) == 6


def late_records(engine: Engine, now: datetime, days_ago: Sequence[int]) -> None:
    """A schedule ``s`` and one late record per age in ``days_ago``."""
    apply_specs(engine, spec("s"))
    with engine.begin() as conn:
        conn.execute(
            insert(late_occurrences),
            [
                {
                    "schedule_name": "s",
                    "instant": now - d * DAY,
                    "deadline": now - d * DAY + MIN,
                    "reason": "failed",
                    "detected_at": now - d * DAY + MIN,
                }
                for d in days_ago
            ],
        )


def late_ages(engine: Engine, now: datetime) -> list[int]:
    with engine.connect() as conn:
        instants = conn.execute(select(late_occurrences.c.instant)).scalars()
        return sorted(round((now - i) / DAY) for i in instants)


def test_late_records_of_old_occurrences_go_oldest_first_a_batch_at_a_time(
    engine: Engine,
) -> None:
    now = datetime.now(UTC)
    late_records(engine, now, [400, 120, 95, 91, 89, 10, 0])
    with engine.begin() as conn:
        assert prune_old_late(conn, LATE_RETAIN, limit=2, now=now) == 2
    assert late_ages(engine, now) == [0, 10, 89, 91, 95]  # the two oldest went
    with engine.begin() as conn:
        assert prune_old_late(conn, LATE_RETAIN, limit=2, now=now) == 2
        assert prune_old_late(conn, LATE_RETAIN, limit=2, now=now) == 0
    assert late_ages(engine, now) == [0, 10, 89]


def test_an_idle_executor_prunes_old_late_records_past_a_batch(engine: Engine) -> None:
    now = datetime.now(UTC)
    late_records(engine, now, [200 + d for d in range(7)] + [30])
    ex = Executor(engine, poll_interval=0.05, prune_interval=60)
    ex._loop.pruner.batch = 3  # seven old records: three steps of one pass, the last short
    stop = threading.Event()
    thread = threading.Thread(target=ex.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: late_ages(engine, now) == [30], what="the old late records to go")
    finally:
        stop.set()
        thread.join(15)


# -- the executor prunes when idle; rota prune by hand ------------------------------------


def test_an_idle_executor_prunes_by_the_stored_retention(engine: Engine) -> None:
    short = job_type("short", retain=Retention(succeeded=timedelta(milliseconds=300)))
    long = job_type("long")
    store_types(engine, short, long)
    gone = add_jobs(engine, short, 5)
    kept = add_jobs(engine, long, 5)
    _ex, stop, thread = run_in_thread(engine, poll_interval=0.05, prune_interval=0.1)
    try:
        wait_for(lambda: count(engine) == 5, what="the short-lived jobs to be pruned")
    finally:
        stop.set()
        thread.join(15)
    with engine.connect() as conn:
        left = conn.execute(select(jobs.c.job_id, jobs.c.state)).all()
        attempts = set(conn.execute(select(job_attempts.c.job_id)).scalars())
    assert {r[0] for r in left} == set(kept) and {r[1] for r in left} == {"SUCCEEDED"}
    assert attempts == set(kept) and not set(gone) & attempts


def test_rota_prune_by_hand(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t = job_type("t")
    store_types(engine, t)
    now = datetime.now(UTC)
    long_ago = now - 9 * DAY
    done = add_jobs(engine, t, 3, run_after=long_ago)
    finish(engine, done, JobState.SUCCEEDED, now - 8 * DAY)
    failed = add_jobs(engine, t, 2, run_after=long_ago)
    finish(engine, failed, JobState.FAILED, now - 8 * DAY)  # FAILED is kept 30d
    fresh = add_jobs(engine, t, 1, run_after=long_ago)
    finish(engine, fresh, JobState.SUCCEEDED, now - timedelta(hours=2))
    assert main(["prune", "--dry-run", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "SUCCEEDED t: finished more than 7d ago: 3 would be pruned" in out
    assert "dry run: 3 finished job(s) would be pruned" in out
    assert count(engine) == 6
    assert main(["prune", "--db", db_url]) == 0
    assert "pruned 3 finished job(s) and 3 attempt row(s)" in capsys.readouterr().out
    assert main(["prune", "--state", "failed", "--older-than", "1d", "--db", db_url]) == 0
    assert "pruned 2 finished job(s)" in capsys.readouterr().out
    assert main(["prune", "--older-than", "1h", "--db", db_url]) == 0
    assert "pruned 1 finished job(s)" in capsys.readouterr().out
    assert count(engine) == 0
    late_records(engine, now, [100, 91, 30])
    assert main(["prune", "--db", db_url]) == 0
    assert "; deleted 2 late record(s) of occurrences older than 90d" in capsys.readouterr().out
    assert main(["prune", "--older-than", "7d", "--db", db_url]) == 0
    assert "; deleted 1 late record(s) of occurrences older than 7d" in capsys.readouterr().out
    assert late_ages(engine, now) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--state", "QUEUED"], "only finished jobs are pruned"),
        (["--older-than", "7"], "--older-than: bad duration"),
        (["--older-than", "later"], "--older-than: bad duration"),
    ],
)
def test_rota_prune_refuses_bad_input(
    db_url: str, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", *argv, "--db", db_url]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_rota_prune_on_an_unmigrated_database_says_migrate(tmp_path: Path) -> None:
    assert main(["prune", "--db", f"sqlite:///{tmp_path / 'none.db'}"]) == 1


def test_new_jobs_run_while_an_executor_works_through_a_pruning_backlog(engine: Engine) -> None:
    t = job_type("t")
    store_types(engine, t)
    old = add_jobs(engine, t, 1200, run_after=T0 - DAY)
    finish(engine, old, JobState.SUCCEEDED, T0)  # finished long ago: all due for pruning
    ex = Executor(engine, poll_interval=0.05, prune_interval=0.05)
    ex._pruner.batch = 100  # many steps: claims must get their turns between them
    stop = threading.Event()
    thread = threading.Thread(target=ex.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: count(engine) < 1200, what="pruning to begin")
        fresh = add_jobs(engine, t, 20)
        wait_for(
            lambda: all(s == "SUCCEEDED" for s in _states(engine, fresh)),
            what="the new jobs to run",
        )
        wait_for(lambda: count(engine) == 20, timeout=60, what="the backlog to be pruned")
    finally:
        stop.set()
        thread.join(15)


def test_an_executor_that_never_goes_idle_still_prunes_once_a_pass_is_overdue(
    engine: Engine,
) -> None:
    # Every claim finds work, so the idle moment pruning waits for never comes; a pass
    # overdue by ten intervals is taken between claims anyway, or the history of a busy
    # installation would grow without end.
    t = job_type("t")
    busy = job_type("busy", handler="tests.handlers.plain:finish_after")
    store_types(engine, t, busy)
    old = add_jobs(engine, t, 300, run_after=T0 - DAY)
    finish(engine, old, JobState.SUCCEEDED, T0)  # finished long ago: all due for pruning
    backlog = add_jobs(engine, busy, 800, args={"seconds": 0.05})  # 20 s at 2 at a time
    _ex, stop, thread = run_in_thread(engine, concurrency=2, poll_interval=0.05, prune_interval=0.1)
    try:
        wait_for(lambda: count(engine) == len(backlog), what="the old jobs to be pruned")
        queued = sum(s == "QUEUED" for s in _states(engine, backlog))
    finally:
        stop.set()
        thread.join(15)
    assert queued > 0, "the backlog ran out: the executor went idle, the test proves nothing"


def test_a_failing_pruning_pass_ends_and_waits_for_the_next_interval(engine: Engine) -> None:
    # A pass whose rules cannot be listed (or whose skip ledger cannot be folded) ends
    # there: otherwise it stays due and overdue, and a busy executor retries it after
    # every claim, pausing its claims each time.
    from rota.executor.pruner import Pruner
    from rota.executor.transactions import LoopConnection

    def broken() -> dict[str, JobTypeSpec]:
        raise RuntimeError("job types unreadable")

    pruner = Pruner(LoopConnection(engine), broken, interval=60.0)
    assert pruner.due()
    assert pruner.step() is False  # said (prune_failed), never raised into the claim loop
    now = time.monotonic()
    assert not pruner.due() and pruner.due(now + 61.0)  # the next pass, an interval on
    assert not pruner.overdue(now + 659.0) and pruner.overdue(now + 661.0)


def test_a_zero_prune_interval_never_makes_a_pass_overdue(engine: Engine) -> None:
    from rota.executor.pruner import Pruner
    from rota.executor.transactions import LoopConnection

    pruner = Pruner(LoopConnection(engine), dict, interval=0.0)
    assert not pruner.overdue(time.monotonic() + 3600.0)


def _states(engine: Engine, ids: Sequence[uuid.UUID]) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(jobs.c.state).where(jobs.c.job_id.in_(ids))).scalars())


def test_an_executor_whose_pruning_fails_keeps_claiming_and_says_prune_failed(
    fresh_pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Pruning is upkeep: a role that may not DELETE (least privilege, pruning left to
    # a `rota prune` cron job under another role), a lock or statement timeout on a
    # big history must not stop the executor (a "permanent" database error), pause
    # its claims with the outage backoff, or be reported as the database being down.
    from rota.core.database import make_engine
    from tests.support.pg_roles import login_role

    revoke = 'REVOKE DELETE ON jobs, job_attempts FROM "{role}"'
    with login_role(fresh_pg_url, "rota_np", [revoke]) as url:
        _prune_failing_as(make_engine(url), caplog)


def _prune_failing_as(engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.INFO)
    try:
        t = job_type("t")
        store_types(engine, t)
        old = add_jobs(engine, t, 5, run_after=T0 - DAY)
        finish(engine, old, JobState.SUCCEEDED, T0)  # due for pruning
        apply_specs(engine, spec())
        with engine.begin() as conn:  # three old ledger rows: the newest, and one for two
            conn.execute(
                insert(schedule_skips),
                [
                    {
                        "schedule_name": "s",
                        "reason": "misfire",
                        "first_instant": T0 + i * MIN,
                        "last_instant": T0 + i * MIN,
                        "count": 1,
                        "recorded_at": T0 - (60 - i) * DAY,
                    }
                    for i in (1, 2, 3)
                ],
            )
        _ex, stop, thread = run_in_thread(engine, poll_interval=0.05, prune_interval=0.05)
        try:
            wait_for(
                lambda: count(engine, schedule_skips) == 2 or not thread.is_alive(),
                what="the skip ledger to be folded though every rule fails",
            )

            def said(event: str) -> list[logging.LogRecord]:
                return [r for r in caplog.records if getattr(r, "event", "") == event]

            wait_for(
                lambda: len(said("prune_failed")) >= 1 or not thread.is_alive(),
                what="a pruning pass to fail",
            )
            assert thread.is_alive(), "the executor stopped over a pruning failure"
            fresh = add_jobs(engine, t, 10)
            wait_for(
                lambda: all(s == "SUCCEEDED" for s in _states(engine, fresh)),
                what="new jobs to run beside the failing pruning",
            )
            # Many passes have failed by now (one each 0.05 s): one line a minute says so.
            assert len(said("prune_failed")) == 1, said("prune_failed")
            failed = said("prune_failed")[0]
            assert "permission denied" in failed.getMessage(), failed.getMessage()
            assert failed.levelno == logging.WARNING
            assert not said("database_unusable") and not said("database_unavailable")
        finally:
            stop.set()
            thread.join(15)
        assert count(engine) == 15  # nothing pruned, nothing lost
    finally:
        engine.dispose()
