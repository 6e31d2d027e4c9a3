"""Backpressure and load shedding: max_queued, max_queue_age, shed_below_priority."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

import rota
from rota.core.config import JobTypeSpec
from rota.core.metric_deltas import END_TO_END, Deltas, delta
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.jobs_read import database_now
from rota.core.queries.metric_tables import add_metric_deltas
from rota.core.tables import jobs
from rota.producer.backpressure import DEFAULT_RETRY_AFTER, QueueFull
from rota.producer.enqueue import JobRequest, enqueue, enqueue_many
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import loopback
from tests.support.api_support import rota_cmd, running_api
from tests.support.executor_support import job_type, store_types, subprocess_env


def count(engine: Engine, job_type_name: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.job_type == job_type_name)
            ).scalar_one()
        )


def submit(engine: Engine, name: str, **kwargs: object) -> rota.Enqueued:
    with engine.begin() as conn:
        return enqueue(conn, name, **kwargs)  # type: ignore[arg-type]


# -- the schedule file --------------------------------------------------------------


def test_the_file_takes_the_limits_and_stores_them() -> None:
    sf = load_schedule_text(
        "job_types:\n"
        "  api.call:\n"
        "    handler: m:f\n"
        "    max_queued: 1000\n"
        "    max_queue_age: 5m\n"
        "    shed_below_priority: 10\n",
        "f.yaml",
    )
    spec = sf.job_types["api.call"]
    assert spec.max_queued == 1000
    assert spec.max_queue_age == timedelta(minutes=5)
    assert spec.shed_below_priority == 10
    assert JobTypeSpec.from_json(spec.to_json()) == spec
    assert spec.to_json()["max_queue_age"] == "5m"


def test_a_definition_stored_before_the_limits_reads_back_unchanged() -> None:
    plain = JobTypeSpec(name="old", handler="m:f")
    stored = plain.to_json()
    assert "max_queued" not in stored and "shed_below_priority" not in stored
    assert JobTypeSpec.from_json(stored) == plain
    assert not plain.has_limits


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            "max_queued: 0",
            "f.yaml:4: job type 'w', max_queued: must be between 1 and 1,000,000,000, got 0",
        ),
        ("max_queued: lots", "f.yaml:4: job type 'w', max_queued: expected a whole number"),
        ("max_queue_age: 0s", "f.yaml:4: job type 'w', max_queue_age: must be longer than 0s"),
        ("max_queue_age: 5", "f.yaml:4: job type 'w', max_queue_age: bad duration"),
        (
            "shed_below_priority: 5",
            "f.yaml:4: job type 'w', shed_below_priority: needs max_queued or max_queue_age",
        ),
    ],
)
def test_bad_limits_are_refused_with_file_and_line(fields: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_schedule_text(f"job_types:\n  w:\n    handler: m:f\n    {fields}\n", "f.yaml")
    assert any(str(p).startswith(expected) for p in info.value.problems), info.value.problems


# -- the producer API ------------------------------------------------------------------


def test_max_queued_refuses_past_the_limit_and_creates_nothing(engine: Engine) -> None:
    store_types(engine, job_type("t", max_queued=2), job_type("free"))
    submit(engine, "t")
    submit(engine, "t")
    with pytest.raises(rota.QueueFull) as info:
        submit(engine, "t")
    assert info.value.reason == "max_queued"
    assert info.value.retry_after == DEFAULT_RETRY_AFTER  # nothing completed recently
    assert "2 waiting, max_queued 2" in str(info.value)
    with pytest.raises(QueueFull), engine.begin() as conn:
        enqueue_many(conn, [JobRequest("free"), JobRequest("t")])
    assert count(engine, "t") == 2 and count(engine, "free") == 0  # the batch, whole
    submit(engine, "free")  # other types are not limited


def test_a_known_dedup_key_is_answered_even_when_full(engine: Engine) -> None:
    store_types(engine, job_type("t", max_queued=1))
    first = submit(engine, "t", dedup_key="order-1")
    again = submit(engine, "t", dedup_key="order-1")
    assert again.job_id == first.job_id and not again.created
    with pytest.raises(QueueFull):
        submit(engine, "t", dedup_key="order-2")


def test_scheduled_occurrences_are_never_refused_but_count(engine: Engine) -> None:
    spec = job_type("t", max_queued=2)
    store_types(engine, spec)
    occurrences = [
        NewJob.of_type(spec, schedule_name="s", dedup_key=f"s@{i}", scheduled_for=None)
        for i in range(3)
    ]
    with engine.begin() as conn:
        assert len(insert_jobs_or_skip(conn, occurrences)) == 3  # the scheduler's insert
    with pytest.raises(QueueFull) as info:
        submit(engine, "t")
    assert "3 waiting" in str(info.value)


def test_max_queue_age_counts_only_due_jobs(engine: Engine) -> None:
    store_types(engine, job_type("t", max_queue_age=timedelta(minutes=1)))
    with engine.connect() as conn:
        now = database_now(conn)
    submit(engine, "t", run_after=now + timedelta(hours=1))  # not due: not waiting yet
    submit(engine, "t")
    submit(engine, "t", run_after=now - timedelta(minutes=10))  # due ten minutes ago
    with pytest.raises(QueueFull) as info:
        submit(engine, "t")
    assert info.value.reason == "max_queue_age"
    assert "max_queue_age 60 s" in str(info.value)


def test_low_priority_is_shed_first(engine: Engine) -> None:
    store_types(engine, job_type("t", max_queued=4, shed_below_priority=0))
    submit(engine, "t", priority=5)
    submit(engine, "t", priority=5)  # 2 waiting: half of max_queued
    with pytest.raises(QueueFull) as info:
        submit(engine, "t", priority=5)
    assert info.value.reason == "shed"
    assert "priority 5 is below shed_below_priority 0" in str(info.value)
    submit(engine, "t", priority=0)
    submit(engine, "t")  # the job type's priority, 0
    with pytest.raises(QueueFull) as full:
        submit(engine, "t", priority=0)
    assert full.value.reason == "max_queued"


def test_retry_after_follows_the_recent_completion_rate(engine: Engine) -> None:
    store_types(engine, job_type("t", max_queued=1))
    submit(engine, "t")
    deltas: Deltas = {}
    for _ in range(60):  # 60 done in the window of 5 minutes: 0.2 jobs per second
        delta(END_TO_END, ("t", "SUCCEEDED"), 1.0, deltas)
    delta(END_TO_END, ("other", "SUCCEEDED"), 1.0, deltas)
    with engine.begin() as conn:
        add_metric_deltas(conn, deltas)
    with pytest.raises(QueueFull) as info:
        submit(engine, "t")
    assert info.value.retry_after == 5  # one job must finish, at 0.2 per second


# -- the HTTP API and the command line -------------------------------------------------


def test_http_answers_429_with_retry_after(engine: Engine) -> None:
    store_types(engine, job_type("t", max_queued=1))
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        assert client.post("/jobs", json={"job_type": "t"}).status_code == 202
        r = client.post("/jobs", json={"job_type": "t"})
        assert r.status_code == 429
        assert r.headers["retry-after"] == str(DEFAULT_RETRY_AFTER)
        assert r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert body["reason"] == "max_queued" and body["retry_after"] == DEFAULT_RETRY_AFTER
    assert count(engine, "t") == 1


def test_rota_enqueue_exits_1_with_the_message(db_url: str, engine: Engine, tmp_path: Path) -> None:
    store_types(engine, job_type("t", max_queued=1))
    env = subprocess_env(db_url)
    ok = subprocess.run(rota_cmd("enqueue", "t"), env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(rota_cmd("enqueue", "t"), env=env, capture_output=True, text=True)
    assert refused.returncode == 1
    assert "is refusing submissions: 1 waiting, max_queued 1" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_limits_hold_on_an_application_connection_to_another_schema(empty_pg_url: str) -> None:
    from rota.core.database import make_engine
    from rota.migrations.runner import upgrade

    rota_engine = make_engine(empty_pg_url, schema="rq")
    app_engine = make_engine(empty_pg_url)  # the application's: it does not search "rq"
    try:
        upgrade(rota_engine)
        store_types(
            rota_engine,
            job_type("t", max_queued=1),
            job_type("old", max_queue_age=timedelta(minutes=1)),
        )
        with rota_engine.connect() as conn:
            now = database_now(conn)
        with app_engine.begin() as conn:
            rota.enqueue(conn, "t", schema="rq")
            rota.enqueue(conn, "old", run_after=now - timedelta(minutes=5), schema="rq")
        with pytest.raises(rota.QueueFull) as full, app_engine.begin() as conn:
            rota.enqueue(conn, "t", schema="rq")
        assert full.value.reason == "max_queued"
        with pytest.raises(rota.QueueFull) as old, app_engine.begin() as conn:
            rota.enqueue(conn, "old", schema="rq")
        assert old.value.reason == "max_queue_age"
        assert count(rota_engine, "t") == 1 and count(rota_engine, "old") == 1
    finally:
        rota_engine.dispose()
        app_engine.dispose()
