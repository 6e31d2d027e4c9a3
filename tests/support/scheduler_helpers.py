"""Shared helpers of the scheduler tests: apply schedules in code, read what was made."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, RowMapping, select

from rota.core.config import JobTypeSpec, ScheduleFile, ScheduleSpec
from rota.core.tables import jobs, schedule_skips, schedules
from rota.scheduler.apply import ApplyResult, apply_schedule_file

T0 = datetime(2026, 3, 2, tzinfo=UTC)
MIN = timedelta(minutes=1)
JOB_TYPE = JobTypeSpec(name="work", handler="tests.handlers.plain:noop", max_attempts=3, pool="p1")


def spec(name: str = "s", **kw: Any) -> ScheduleSpec:
    kw.setdefault("every", MIN)
    return ScheduleSpec(name=name, job_type="work", **kw)


def apply_specs(
    engine: Engine, *specs: ScheduleSpec, now: datetime | None = T0, dry_run: bool = False
) -> ApplyResult:
    sf = ScheduleFile(
        path="test.yaml",
        job_types={JOB_TYPE.name: JOB_TYPE},
        schedules={s.name: s for s in specs},
    )
    return apply_schedule_file(engine, sf, now=now, dry_run=dry_run)


def jobs_of(engine: Engine, name: str = "s") -> Sequence[RowMapping]:
    with engine.connect() as conn:
        return (
            conn.execute(
                select(jobs).where(jobs.c.schedule_name == name).order_by(jobs.c.scheduled_for)
            )
            .mappings()
            .all()
        )


def schedule_row(engine: Engine, name: str = "s") -> RowMapping:
    with engine.connect() as conn:
        return conn.execute(select(schedules).where(schedules.c.name == name)).mappings().one()


def skips_of(engine: Engine, name: str = "s") -> Sequence[RowMapping]:
    with engine.connect() as conn:
        return (
            conn.execute(
                select(schedule_skips)
                .where(schedule_skips.c.schedule_name == name)
                .order_by(schedule_skips.c.skip_id)
            )
            .mappings()
            .all()
        )
