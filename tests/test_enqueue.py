"""The producer API: enqueue inside the caller's transaction, deduplicated by key."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from rota.shared.config.model import JobTypeSpec
from rota.shared.enqueue import UnknownJobType, enqueue
from rota.shared.models import jobs
from rota.shared.queries.job_types import upsert_job_types


@pytest.fixture
def with_job_type(engine: Engine) -> Engine:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f", max_attempts=3)])
    return engine


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(jobs)).scalar_one())


def test_enqueue_commits_with_the_callers_transaction(with_job_type: Engine) -> None:
    engine = with_job_type
    with engine.begin() as conn:
        result = enqueue(conn, "report", payload_ref="s3://x", args={"a": 1})
    assert result.created
    with engine.connect() as conn:
        row = conn.execute(select(jobs).where(jobs.c.job_id == result.job_id)).mappings().one()
    assert row["state"] == "QUEUED"
    assert row["max_attempts"] == 3
    assert row["attempt_count"] == 0
    assert row["args"] == {"a": 1}
    assert row["run_after"].tzinfo is not None


def test_enqueue_rolls_back_with_the_callers_transaction(with_job_type: Engine) -> None:
    engine = with_job_type
    with pytest.raises(RuntimeError), engine.begin() as conn:
        enqueue(conn, "report")
        raise RuntimeError("the business change failed")
    assert _count(engine) == 0


def test_dedup_key_returns_the_existing_job(with_job_type: Engine) -> None:
    engine = with_job_type
    with engine.begin() as conn:
        first = enqueue(conn, "report", dedup_key="order-42")
    with engine.begin() as conn:
        second = enqueue(conn, "report", dedup_key="order-42")
    assert first.created and not second.created
    assert second.job_id == first.job_id
    assert _count(engine) == 1


def test_unknown_job_type_is_refused(engine: Engine) -> None:
    with pytest.raises(UnknownJobType, match="rota apply"), engine.begin() as conn:
        enqueue(conn, "nope")
