"""The metric series of a job type or schedule that is gone from the applied configuration
disappear once nothing of it remains; the others stay.

A schedule is gone once ``rota apply`` marked it removed, a job type once the
applied file no longer declares it (nor names it in a schedule). Their series
(``metric_totals``, what ``GET /metrics`` exports) are deleted by the first
``rota apply`` or ``rota prune`` (a schedule's) or ``rota apply`` (a job
type's) that finds none of their jobs left.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, delete

from rota.core.config import JobTypeSpec, ScheduleFile
from rota.core.metric_deltas import (
    DEADLINE_MISSED,
    END_TO_END,
    QUEUE_WAIT,
    SCHEDULE_SKIPPED,
    Deltas,
    decode_labels,
    delta,
)
from rota.core.queries.metric_tables import add_metric_deltas, read_totals
from rota.core.tables import jobs
from rota.operations.prune import prune
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.service import SchedulerService
from tests.support.executor_support import add_jobs
from tests.support.scheduler_helpers import JOB_TYPE, MIN, T0, spec

OLD_TYPE = JobTypeSpec(name="old.work", handler="tests.handlers.plain:noop")


def apply(engine: Engine, *names: str, types: tuple[JobTypeSpec, ...] = (JOB_TYPE,)) -> None:
    sf = ScheduleFile(
        path="test.yaml",
        job_types={t.name: t for t in types},
        schedules={n: spec(n) for n in names},
    )
    apply_schedule_file(engine, sf, now=T0)


def observe(engine: Engine) -> None:
    deltas: Deltas = {}
    for job_type in ("work", "old.work"):
        delta(QUEUE_WAIT, (job_type,), 0.2, deltas)
        delta(END_TO_END, (job_type, "SUCCEEDED"), 1.0, deltas)
    for schedule in ("kept", "gone"):
        delta(DEADLINE_MISSED, (schedule, "failed"), 1, deltas)
        delta(SCHEDULE_SKIPPED, (schedule, "overlap"), 1, deltas)
    with engine.begin() as conn:
        add_metric_deltas(conn, deltas)


def exported(engine: Engine, label: int = 0) -> dict[str, set[str]]:
    """Metric name -> the first label value of each of its stored series."""
    out: dict[str, set[str]] = {}
    with engine.connect() as conn:
        for r in read_totals(conn):
            out.setdefault(r["metric"], set()).add(decode_labels(r["labels"])[label])
    return out


def finish_all(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            jobs.update().values(state="SUCCEEDED", finished_at=jobs.c.created_at, attempt_count=1)
        )


def test_a_removed_schedule_s_series_go_once_its_jobs_are_pruned(engine: Engine) -> None:
    both = (JOB_TYPE, OLD_TYPE)
    apply(engine, "kept", "gone", types=both)
    SchedulerService(engine).run_once(T0 + MIN)  # a job of each
    observe(engine)
    apply(engine, "kept", types=both)  # "gone" is removed, but its job remains
    assert exported(engine)[DEADLINE_MISSED.name] == {"kept", "gone"}
    finish_all(engine)
    prune(engine, older_than=timedelta(0))
    series = exported(engine)
    assert series[DEADLINE_MISSED.name] == {"kept"}
    assert series[SCHEDULE_SKIPPED.name] == {"kept"}
    assert series[QUEUE_WAIT.name] == {"work", "old.work"}  # declared job types stay


def test_an_undeclared_job_type_s_series_go_at_the_next_apply_once_none_of_its_jobs_remain(
    engine: Engine,
) -> None:
    apply(engine, "kept", types=(JOB_TYPE, OLD_TYPE))
    observe(engine)
    add_jobs(engine, OLD_TYPE)  # one job of the old type remains
    apply(engine, "kept")  # old.work is no longer declared, but a job of it remains
    assert exported(engine)[QUEUE_WAIT.name] == {"work", "old.work"}
    with engine.begin() as conn:
        conn.execute(delete(jobs).where(jobs.c.job_type == "old.work"))
    apply(engine, "kept")
    series = exported(engine)
    assert series[QUEUE_WAIT.name] == {"work"}
    assert series[END_TO_END.name] == {"work"}
    assert series[DEADLINE_MISSED.name] == {"kept"}  # "gone" was never applied: it goes too


def test_a_file_without_job_types_forgets_no_job_type(engine: Engine) -> None:
    apply(engine, "kept", types=(JOB_TYPE, OLD_TYPE))
    observe(engine)
    sf = ScheduleFile(
        path="test.yaml",
        job_types={},
        schedules={"kept": spec("kept")},
        stored_job_type_lines={"kept": 3},
    )
    apply_schedule_file(engine, sf, now=T0)
    assert exported(engine)[QUEUE_WAIT.name] == {"work", "old.work"}
