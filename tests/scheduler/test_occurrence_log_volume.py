"""A burst of occurrences logs a bounded number of lines: one per schedule and batch.

A normal tick still logs one ``occurrence_created`` per occurrence
(``test_tick``); past ``OCCURRENCE_LINES`` in one batch, a schedule's
occurrences are summarised in one ``occurrences_created`` line with their
count and first and last instants. DEBUG still has every one.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from rota.core.config import MisfirePolicy
from rota.operations.schedules import backfill
from rota.scheduler.service import SchedulerService
from rota.scheduler.tick_log import OCCURRENCE_LINES
from tests.support.scheduler_helpers import MIN, T0, apply_specs, jobs_of, spec

BURST = 10_000


def _events(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "rota.scheduler" and r.levelno >= level]


def test_a_catch_up_of_ten_thousand_logs_a_line_per_batch(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP, catch_up_window=timedelta(days=8)))
    service = SchedulerService(engine)
    with caplog.at_level(logging.INFO, logger="rota.scheduler"):
        result = service.run_once(T0 + BURST * MIN + timedelta(seconds=30))
    assert result.created == BURST
    records = _events(caplog)
    assert len(records) <= 2 * result.batches + 5, len(records)
    assert not [r for r in records if getattr(r, "event", None) == "occurrence_created"]
    summaries = [r for r in records if getattr(r, "event", None) == "occurrences_created"]
    fields = [r.fields for r in summaries]  # type: ignore[attr-defined]
    assert sum(f["count"] for f in fields) == BURST
    assert all(f["schedule"] == "s" for f in fields)
    assert fields[0]["first"] == (T0 + MIN).isoformat()
    assert fields[-1]["last"] == (T0 + BURST * MIN).isoformat()


def test_debug_still_has_a_line_per_occurrence(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP, catch_up_window=timedelta(days=1)))
    n = OCCURRENCE_LINES * 3
    with caplog.at_level(logging.DEBUG, logger="rota.scheduler"):
        SchedulerService(engine).run_once(T0 + n * MIN + timedelta(seconds=30))
    per_job = [r for r in caplog.records if getattr(r, "event", None) == "occurrence_created"]
    assert len(per_job) == n and all(r.levelno == logging.DEBUG for r in per_job)


def test_a_few_occurrences_still_log_one_line_each(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP, catch_up_window=timedelta(days=1)))
    n = OCCURRENCE_LINES
    with caplog.at_level(logging.INFO, logger="rota.scheduler"):
        SchedulerService(engine).run_once(T0 + n * MIN + timedelta(seconds=30))
    per_job = [r for r in _events(caplog) if getattr(r, "event", None) == "occurrence_created"]
    assert len(per_job) == n == len(jobs_of(engine))


def test_a_backfill_of_ten_thousand_logs_a_bounded_number_of_lines(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.SKIP))
    start, end = T0 + MIN, T0 + (BURST + 1) * MIN
    with caplog.at_level(logging.INFO, logger="rota"):
        done = backfill(engine, "s", start, end, now=end + MIN)
    assert done.created == BURST
    records = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(records) <= 5, [r.getMessage() for r in records]
    (line,) = [r for r in records if getattr(r, "event", None) == "schedule_backfilled"]
    assert line.fields["created"] == BURST  # type: ignore[attr-defined]
