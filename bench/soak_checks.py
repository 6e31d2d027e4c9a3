"""The chaos soak's checks: each reads the tables (or the logs) and names what is wrong.

Each check returns a ``Check``: a name, a one-line summary and the evidence of
every violation found (at most ``EVIDENCE`` lines shown, all counted). They are
plain functions of a database connection, so ``tests/test_soak.py`` feeds each
one a fabricated bad case (a duplicated occurrence, an attempt over the budget,
a traceback in a log, ...) and asserts that it is reported: the soak cannot
pass vacuously. SQLAlchemy Core only, so they run on SQLite as on PostgreSQL.
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select

from rota.core.config import ScheduleSpec
from rota.core.states import LEASED, TERMINAL, AttemptOutcome, JobState
from rota.core.tables import job_attempts, jobs, schedule_skips, schedules, workers
from rota.scheduler.rules import compile_rule, iter_between

EVIDENCE = 12
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Check:
    name: str
    summary: str = ""
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def render(self) -> str:
        status = "ok  " if self.ok else "FAIL"
        lines = [f"[{status}] {self.name}: {self.summary}"]
        for line in self.violations[:EVIDENCE]:
            lines.append(f"         {line}")
        if len(self.violations) > EVIDENCE:
            lines.append(f"         ... and {len(self.violations) - EVIDENCE} more")
        return "\n".join(lines)


def check_occurrences(conn: Connection, specs: Mapping[str, ScheduleSpec], end: datetime) -> Check:
    """Every occurrence exactly one job, per schedule, per instant in (applied, end].

    ``applied`` is the schedule row's ``created_at``. An instant without a job
    must be covered by a ``schedule_skips`` row (what the misfire policy
    dropped, counted); a job at an instant the rule does not produce, or two
    jobs at one instant, is a violation.
    """
    check = Check("every occurrence exactly one job")
    expected_total = made_total = skipped_total = 0
    for name, spec in sorted(specs.items()):
        row = conn.execute(
            select(schedules.c.created_at).where(schedules.c.name == name)
        ).one_or_none()
        if row is None:
            check.violations.append(f"{name}: no schedule row (never applied)")
            continue
        start: datetime = row.created_at
        rule = compile_rule(spec)
        expected = [o.instant for o in iter_between(rule, start, end) if not o.skipped]
        made: dict[datetime, int] = defaultdict(int)
        for (instant,) in conn.execute(
            select(jobs.c.scheduled_for).where(
                jobs.c.schedule_name == name, jobs.c.scheduled_for.is_not(None)
            )
        ):
            made[instant] += 1
        skipped: list[tuple[datetime, datetime]] = [
            (r.first_instant, r.last_instant)
            for r in conn.execute(
                select(schedule_skips.c.first_instant, schedule_skips.c.last_instant).where(
                    schedule_skips.c.schedule_name == name
                )
            )
        ]
        expected_set = set(expected)
        expected_total += len(expected)
        made_total += sum(1 for t in expected if made.get(t))
        for instant in expected:
            count = made.get(instant, 0)
            if count > 1:
                check.violations.append(f"{name}@{_z(instant)}: {count} jobs (duplicated)")
            elif count == 0:
                if any(a <= instant <= b for a, b in skipped):
                    skipped_total += 1
                else:
                    check.violations.append(f"{name}@{_z(instant)}: no job and no skip record")
        for instant, count in sorted(made.items()):
            if instant not in expected_set and start < instant <= end:
                check.violations.append(
                    f"{name}@{_z(instant)}: {count} job(s) at an instant the rule does not produce"
                )
        if not expected:
            check.violations.append(f"{name}: no occurrence fell in the window (vacuous)")
    check.summary = (
        f"{expected_total} occurrences in the window, {made_total} with one job, "
        f"{skipped_total} skipped by policy (recorded)"
    )
    return check


def check_committed(conn: Connection, committed: Iterable[uuid.UUID]) -> Check:
    """Every job whose enqueue returned (committed) still exists."""
    wanted = list(committed)
    found: set[uuid.UUID] = set()
    for i in range(0, len(wanted), 1000):
        chunk = wanted[i : i + 1000]
        found.update(
            r[0] for r in conn.execute(select(jobs.c.job_id).where(jobs.c.job_id.in_(chunk)))
        )
    check = Check("nothing committed lost", f"{len(found)} of {len(wanted)} enqueued jobs found")
    check.violations = [f"job {j}: enqueue committed, row gone" for j in wanted if j not in found]
    return check


def check_terminal_kept(conn: Connection, snapshot: Mapping[uuid.UUID, str], label: str) -> Check:
    """Jobs seen finished before ``label`` are still finished, in the same state."""
    now = (
        {
            r.job_id: r.state
            for r in conn.execute(
                select(jobs.c.job_id, jobs.c.state).where(jobs.c.job_id.in_(list(snapshot)))
            )
        }
        if snapshot
        else {}
    )
    check = Check(
        f"outcomes committed before {label} kept",
        f"{len(snapshot)} finished jobs seen before, {len(now)} found",
    )
    for job_id, state in snapshot.items():
        if now.get(job_id) != state:
            check.violations.append(
                f"job {job_id}: {state} before {label}, {now.get(job_id)} after"
            )
    return check


def check_settled(conn: Connection, at: datetime) -> Check:
    """No job lost: each terminal, or pending with a reason shown.

    Reasons accepted for a job not terminal at ``at`` (the instant the final drain
    found nothing due and nothing held):
    it waits for a retry (``run_after`` later than ``at``), or it was handed
    back by a graceful shutdown (its newest attempt RELEASED) and waits for an
    executor. A leased job, or a due job with no such reason, is lost.
    """
    check = Check("no job lost")
    last_outcome = _last_outcomes(conn)
    reasons: dict[str, int] = defaultdict(int)
    terminal = 0
    for r in conn.execute(
        select(jobs.c.job_id, jobs.c.job_type, jobs.c.state, jobs.c.run_after, jobs.c.lease_owner)
    ):
        if r.state in TERMINAL:
            terminal += 1
            continue
        if r.state in (JobState.QUEUED, JobState.RETRY_WAIT) and r.run_after > at:
            reasons[f"{r.state} until its run_after (backoff)"] += 1
        elif r.state == JobState.QUEUED and last_outcome.get(r.job_id) == AttemptOutcome.RELEASED:
            reasons["QUEUED, released by a graceful shutdown"] += 1
        elif r.state in LEASED:
            check.violations.append(
                f"job {r.job_id} ({r.job_type}): still {r.state}, held by {r.lease_owner}"
            )
        else:
            check.violations.append(
                f"job {r.job_id} ({r.job_type}): {r.state}, due since {_z(r.run_after)}, never run"
            )
    pending = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items())) or "none pending"
    check.summary = f"{terminal} terminal; {pending}"
    return check


def _last_outcomes(conn: Connection) -> dict[uuid.UUID, str | None]:
    newest = (
        select(job_attempts.c.job_id, func.max(job_attempts.c.lease_generation).label("g"))
        .group_by(job_attempts.c.job_id)
        .subquery()
    )
    rows = conn.execute(
        select(job_attempts.c.job_id, job_attempts.c.outcome).join(
            newest,
            (newest.c.job_id == job_attempts.c.job_id)
            & (newest.c.g == job_attempts.c.lease_generation),
        )
    )
    return {r.job_id: r.outcome for r in rows}


def _attempts_by_job(conn: Connection) -> dict[uuid.UUID, list[Any]]:
    found: dict[uuid.UUID, list[Any]] = defaultdict(list)
    for r in conn.execute(
        select(job_attempts).order_by(job_attempts.c.job_id, job_attempts.c.lease_generation)
    ):
        found[r.job_id].append(r)
    return found


_SUCCESS = (AttemptOutcome.SUCCEEDED, AttemptOutcome.RECONCILED)


def check_generations(conn: Connection) -> Check:
    """No outcome written by a stale generation, no two attempts held at once.

    From ``job_attempts``, per job, in generation order: no attempt newer than
    the job's ``lease_generation``; every attempt but the newest closed (ended,
    with an outcome) no later than the next one started; at most one success,
    and only on the newest attempt; a finished job's newest attempt closed with
    an outcome that agrees with the job's state.
    """
    check = Check("no stale generation, no overlapping attempts")
    attempts = _attempts_by_job(conn)
    n_attempts = sum(len(a) for a in attempts.values())
    agrees = {
        JobState.SUCCEEDED: _SUCCESS,
        JobState.CANCELLED: (AttemptOutcome.CANCELLED, AttemptOutcome.LEASE_EXPIRED),
        JobState.FAILED: (
            AttemptOutcome.FAILED,
            AttemptOutcome.AMBIGUOUS,
            AttemptOutcome.LEASE_EXPIRED,
            AttemptOutcome.LEASE_LOST,
        ),
    }
    for job in conn.execute(
        select(jobs.c.job_id, jobs.c.job_type, jobs.c.state, jobs.c.lease_generation)
    ):
        rows = attempts.get(job.job_id, [])
        if not rows:
            continue
        where = f"job {job.job_id} ({job.job_type})"
        if rows[-1].lease_generation != job.lease_generation:
            check.violations.append(
                f"{where}: newest attempt has generation {rows[-1].lease_generation}, "
                f"the job {job.lease_generation}"
            )
        for older, newer in itertools.pairwise(rows):
            if older.ended_at is None or older.outcome is None:
                check.violations.append(
                    f"{where}: generation {older.lease_generation} still open when "
                    f"generation {newer.lease_generation} started at {_z(newer.started_at)}"
                )
            elif older.ended_at > newer.started_at:
                check.violations.append(
                    f"{where}: generation {older.lease_generation} held until "
                    f"{_z(older.ended_at)}, after generation {newer.lease_generation} "
                    f"started at {_z(newer.started_at)} (overlap)"
                )
        for row in rows[:-1]:
            if row.outcome in _SUCCESS:
                check.violations.append(
                    f"{where}: generation {row.lease_generation} ({row.worker_id}) wrote "
                    f"{row.outcome}, yet a newer generation {rows[-1].lease_generation} ran"
                )
        newest = rows[-1]
        allowed = agrees.get(JobState(job.state))
        if allowed is not None and newest.outcome not in allowed:
            check.violations.append(
                f"{where}: {job.state}, but its newest attempt (generation "
                f"{newest.lease_generation}) says {newest.outcome}"
            )
        if job.state in TERMINAL and newest.ended_at is None:
            check.violations.append(f"{where}: {job.state} with its newest attempt open")
    check.summary = f"{n_attempts} attempts of {len(attempts)} jobs read"
    return check


def check_attempt_budget(conn: Connection) -> Check:
    """Attempts never above max_attempts: the counter, and the attempts that cost one."""
    check = Check("attempts never above max_attempts")
    attempts = _attempts_by_job(conn)
    worst = 0
    for job in conn.execute(
        select(jobs.c.job_id, jobs.c.job_type, jobs.c.attempt_count, jobs.c.max_attempts)
    ):
        rows = attempts.get(job.job_id, [])
        costly = [r for r in rows if r.outcome != AttemptOutcome.RELEASED]
        numbers = [r.attempt for r in rows]
        worst = max(worst, len(costly))
        where = f"job {job.job_id} ({job.job_type})"
        if job.attempt_count > job.max_attempts:
            check.violations.append(
                f"{where}: attempt_count {job.attempt_count} > max_attempts {job.max_attempts}"
            )
        if len(costly) > job.max_attempts:
            check.violations.append(
                f"{where}: {len(costly)} attempts cost an attempt, max_attempts {job.max_attempts}"
            )
        if numbers and max(numbers) > job.max_attempts:
            check.violations.append(
                f"{where}: an attempt numbered {max(numbers)} > max_attempts {job.max_attempts}"
            )
    check.summary = f"most attempts spent by one job: {worst}"
    return check


def check_live(
    conn: Connection,
    processes: Sequence[tuple[str, int]],
    since: datetime,
    claimed_by: Mapping[int, int] | None = None,
) -> Check:
    """Each live process still ticks or claims after ``since``.

    ``processes`` are (kind, pid) of the processes alive at the end. Each must
    have a ``workers`` row refreshed after ``since``; each executor (its pid in
    ``claimed_by``, counting its attempts started after ``since``) must have
    claimed something.
    """
    check = Check("no process wedged")
    seen = {
        r.pid: r
        for r in conn.execute(
            select(
                workers.c.pid, workers.c.kind, workers.c.worker_id, workers.c.last_seen_at
            ).order_by(workers.c.started_at)
        )
    }
    fresh = 0
    for kind, pid in processes:
        row = seen.get(pid)
        if row is None:
            check.violations.append(f"{kind} pid {pid}: no row in the workers table")
            continue
        if row.last_seen_at < since:
            check.violations.append(
                f"{kind} pid {pid} ({row.worker_id}): last seen {_z(row.last_seen_at)}, "
                f"before {_z(since)}"
            )
            continue
        if kind == "executor" and claimed_by is not None and claimed_by.get(pid, 0) == 0:
            check.violations.append(
                f"executor pid {pid} ({row.worker_id}): claimed nothing since {_z(since)}"
            )
            continue
        fresh += 1
    check.summary = f"{fresh} of {len(processes)} live processes seen working since {_z(since)}"
    return check


def claims_since(conn: Connection, pids: Iterable[int], since: datetime) -> dict[int, int]:
    """Attempts started after ``since`` by the executor of each pid (via the workers table)."""
    ids = {
        r.worker_id: r.pid
        for r in conn.execute(
            select(workers.c.worker_id, workers.c.pid).where(workers.c.pid.in_(list(pids)))
        )
    }
    counts: dict[int, int] = defaultdict(int)
    if not ids:
        return counts
    for worker_id, n in conn.execute(
        select(job_attempts.c.worker_id, func.count())
        .where(job_attempts.c.worker_id.in_(list(ids)), job_attempts.c.started_at > since)
        .group_by(job_attempts.c.worker_id)
    ):
        counts[ids[worker_id]] += int(n)
    return counts


def check_logs(paths: Iterable[Path]) -> Check:
    """No Python traceback in any process log."""
    check = Check("no traceback in any log")
    n = 0
    for path in sorted(paths):
        n += 1
        lines = path.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if TRACEBACK in line:
                tail = next(
                    (x.strip() for x in lines[i + 1 : i + 60] if x and not x.startswith(" ")),
                    "",
                )
                check.violations.append(f"{path.name}:{i + 1}: {tail[:200]}")
    check.summary = f"{n} logs read"
    return check


def check_recovered(name: str, waits: Sequence[float | None], limit: float) -> Check:
    """Work resumed after each outage within ``limit`` seconds."""
    check = Check(f"{name} recovered after each outage")
    for i, wait in enumerate(waits, 1):
        if wait is None or wait > limit:
            check.violations.append(
                f"outage {i}: {'no recovery' if wait is None else f'{wait:.1f}s'} "
                f"(limit {limit:.0f}s)"
            )
    shown = ", ".join("-" if w is None else f"{w:.1f}s" for w in waits) or "no outage"
    check.summary = shown
    return check


def _z(t: datetime | None) -> str:
    if t is None:
        return "-"
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def window_end(stopped_at: datetime, margin: timedelta = timedelta(seconds=3)) -> datetime:
    """The end of the occurrence window: a little before the schedulers were stopped."""
    return stopped_at - margin
