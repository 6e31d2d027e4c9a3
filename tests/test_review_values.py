"""Hostile and legal args through enqueue_many's fast path (review of the flat path)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from rota.shared.config.model import JobTypeSpec
from rota.shared.enqueue import JobRequest, enqueue_many
from rota.shared.models import jobs
from rota.shared.queries.job_types import upsert_job_types


@pytest.fixture
def with_job_type(engine: Engine) -> Engine:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f", max_attempts=3)])
    return engine


LEGAL: list[dict[str, Any]] = [
    {"a": "😀 é \u2028 \\u0000 \"q\" \\"},
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
