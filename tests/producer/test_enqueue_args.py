"""Hostile and legal args through enqueue_many's fast path (the flat path)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from rota.core.config import JobTypeSpec
from rota.core.queries.job_types import upsert_job_types
from rota.core.tables import jobs
from rota.producer.enqueue import JobRequest, enqueue_many
from tests.support.executor_support import add_jobs, job_row, run_in_thread, store_types, wait_for


@pytest.fixture
def with_job_type(engine: Engine) -> Engine:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f", max_attempts=3)])
    return engine


LEGAL: list[dict[str, Any]] = [
    {"a": '😀 é \u2028 \\u0000 "q" \\'},
    {"": 1, "ключ": -0.0, "b": 1e308, "c": -(10**299), "d": 10**299},
    {"a": True, "b": False, "c": None, "d": 0},
    {"a": {"b": [1, 2.5, "x", None, {"c": []}]}},
]


def _stored(engine: Engine, requests: list[JobRequest]) -> list[Any]:
    with engine.begin() as conn:
        done = enqueue_many(conn, requests)
    with engine.connect() as conn:
        rows = dict(conn.execute(select(jobs.c.job_id, jobs.c.args)).all())
    return [rows[d.job_id] for d in done]


def test_legal_args_round_trip_in_one_batch_and_alone(with_job_type: Engine) -> None:
    many = _stored(with_job_type, [JobRequest("report", args=a) for a in LEGAL])
    assert many == LEGAL
    for args in LEGAL:
        assert _stored(with_job_type, [JobRequest("report", args=args)]) == [args]
    same = _stored(with_job_type, [JobRequest("report", args=LEGAL[0])] * 3)
    assert same == [LEGAL[0]] * 3


class _Key(str):
    """A str subclass whose instances are distinct dict keys with the same text."""

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


class _Hiding(str):
    """A str subclass that hides its NUL from ``in``."""

    def __contains__(self, item: object) -> bool:
        return False


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({_Key("a"): 1, _Key("a"): 2}, id="keys-colliding-as-json"),
        pytest.param({"a": _Hiding("x\x00y")}, id="str-subclass-hiding-nul"),
        pytest.param({_Hiding("k\x00"): 1}, id="key-subclass-hiding-nul"),
    ],
)
def test_args_that_do_not_round_trip_are_refused(
    with_job_type: Engine, args: dict[Any, Any]
) -> None:
    with pytest.raises(ValueError, match="args"), with_job_type.begin() as conn:
        enqueue_many(conn, [JobRequest("report", args=args), JobRequest("report")])
    with with_job_type.connect() as conn:
        assert conn.execute(select(jobs.c.job_id)).first() is None


BIG = {"a": "x" * 200_000}  # legal args (under 1 MB), too long for one environment variable


def test_args_a_command_cannot_receive_are_refused_at_enqueue(engine: Engine) -> None:
    """A ``command:`` gets its args in ``ROTA_ARGS``: Linux refuses one environment
    string longer than 128 KiB (E2BIG), so every attempt would fail with OSError."""
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="cmd", command=("true",))])
    with pytest.raises(ValueError, match=r"ROTA_ARGS.*payload_ref"), engine.begin() as conn:
        enqueue_many(conn, [JobRequest("cmd", args=BIG)])
    with engine.begin() as conn:  # a Python handler takes them as before
        upsert_job_types(conn, [JobTypeSpec(name="py", handler="m:f")])
        enqueue_many(conn, [JobRequest("py", args=BIG)])


def test_a_command_job_with_args_too_long_for_its_environment_fails_once(
    engine: Engine,
) -> None:
    """Args that reach the executor anyway (a schedule's args, an older producer) fail
    at once with a code that says why, never an OSError retried max_attempts times."""
    spec = JobTypeSpec(name="cmd", command=("true",), max_attempts=3)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args=BIG)
    _ex, stop, t = run_in_thread(engine, poll_interval=0.05, sweep_interval=0.2)
    try:
        wait_for(lambda: job_row(engine, job_id)["state"] == "FAILED", what="FAILED")
    finally:
        stop.set()
        t.join(15)
    row = job_row(engine, job_id)
    assert row["attempt_count"] == 1
    assert row["last_error_code"] == "ARGS_TOO_LARGE_FOR_COMMAND"
    assert "payload_ref" in row["last_error_detail"]
