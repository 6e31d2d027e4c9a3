"""``payload_ref`` is a reference, at most ``PAYLOAD_REF_MAX`` characters, at every entry point.

A longer one would be accepted and then fail every attempt of a ``command:``
job (it travels in ``ROTA_PAYLOAD_REF``, and Linux refuses an environment string
over 128 KiB), so it is refused where it enters: ``rota.enqueue``, ``POST /jobs``,
``rota enqueue`` and the schedule file.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

import rota
from rota.cli.main import main
from rota.core.storable import PAYLOAD_REF_MAX
from rota.core.tables import jobs
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import (
    add_jobs,
    job_row,
    job_type,
    run_in_thread,
    store_types,
    wait_for,
)

LONGEST = "s3://bucket/" + "k" * (PAYLOAD_REF_MAX - len("s3://bucket/"))
TOO_LONG = "s3://bucket/" + "k" * 200_000


def job_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(jobs)).scalar_one())


def test_the_limit_is_8_kib_of_characters() -> None:
    assert PAYLOAD_REF_MAX == 8192
    assert len(LONGEST) == PAYLOAD_REF_MAX


def test_enqueue_refuses_a_longer_payload_ref_and_takes_the_longest(engine: Engine) -> None:
    store_types(engine, job_type("cmd", handler=None, command=("true",)))
    too_long = r"payload_ref is at most 8192 characters, got 200012"
    with pytest.raises(ValueError, match=too_long), engine.begin() as conn:
        rota.enqueue(conn, "cmd", payload_ref=TOO_LONG)
    second = [rota.JobRequest("cmd"), rota.JobRequest("cmd", payload_ref=TOO_LONG)]
    with pytest.raises(ValueError, match=r"request 1: payload_ref is at"), engine.begin() as conn:
        rota.enqueue_many(conn, second)
    assert job_count(engine) == 0
    with engine.begin() as conn:
        rota.enqueue(conn, "cmd", payload_ref=LONGEST)
    assert job_count(engine) == 1


def test_post_jobs_answers_422_naming_the_field(engine: Engine) -> None:
    store_types(engine, job_type("cmd", handler=None, command=("true",)))
    with running_api(engine) as base:
        r = loopback.post(f"{base}/jobs", json={"job_type": "cmd", "payload_ref": TOO_LONG})
        assert r.status_code == 422
        assert r.headers["content-type"] == "application/problem+json"
        assert "payload_ref is at most 8192 characters" in r.json()["detail"]
        assert TOO_LONG not in r.text
        assert job_count(engine) == 0
        ok = loopback.post(f"{base}/jobs", json={"job_type": "cmd", "payload_ref": LONGEST})
        assert ok.status_code == 202
    assert job_count(engine) == 1


def test_rota_enqueue_exits_2(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store_types(engine, job_type("cmd", handler=None, command=("true",)))
    code = main(["enqueue", "cmd", "--payload-ref", TOO_LONG, "--db", db_url])
    err = capsys.readouterr().err
    assert code == 2
    assert "payload_ref is at most 8192 characters" in err
    assert "Traceback" not in err
    assert job_count(engine) == 0


def test_the_schedule_file_refuses_a_longer_payload_ref() -> None:
    text = (
        "job_types:\n"
        "  w:\n"
        "    handler: m:f\n"
        "schedules:\n"
        "  s:\n"
        "    job_type: w\n"
        "    every: 1h\n"
        f"    payload_ref: {'k' * (PAYLOAD_REF_MAX + 1)}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_schedule_text(text, "f.yaml")
    assert "f.yaml:8: " in str(info.value)
    assert "at most 8192 characters" in str(info.value)
    ok = text.replace("k" * (PAYLOAD_REF_MAX + 1), "k" * PAYLOAD_REF_MAX)
    assert load_schedule_text(ok, "f.yaml").schedules["s"].payload_ref == "k" * PAYLOAD_REF_MAX


def test_a_command_job_whose_payload_ref_cannot_reach_it_fails_once(engine: Engine) -> None:
    """A payload_ref that reaches the executor anyway (a row written before the limit)
    fails at once with a code that says why, never an exec refused max_attempts times."""
    spec = job_type("cmd", handler=None, command=("true",), max_attempts=3)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, payload_ref=TOO_LONG)
    _ex, stop, t = run_in_thread(engine, poll_interval=0.05, sweep_interval=0.2)
    try:
        wait_for(lambda: job_row(engine, job_id)["state"] == "FAILED", what="FAILED")
    finally:
        stop.set()
        t.join(15)
    row = job_row(engine, job_id)
    assert row["attempt_count"] == 1
    assert row["last_error_code"] == "PAYLOAD_REF_TOO_LARGE_FOR_COMMAND"
    assert "ROTA_PAYLOAD_REF" in row["last_error_detail"]
