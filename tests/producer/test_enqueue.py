"""The producer API: enqueue inside the caller's transaction, deduplicated by key."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import cast

import pytest
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.queries.job_types import upsert_job_types
from rota.core.tables import jobs
from rota.producer.enqueue import (
    FIRST_PIPELINE_BATCH,
    PIPELINE_BATCH,
    JobRequest,
    UnknownJobType,
    enqueue,
    enqueue_many,
)


@pytest.fixture(name="with_job_type")
def with_job_type_fixture(engine: Engine) -> Engine:
    return with_job_type(engine)


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


def test_enqueue_many_creates_all_in_order_and_dedups(with_job_type: Engine) -> None:
    engine = with_job_type
    with engine.begin() as conn:
        first = enqueue(conn, "report", dedup_key="k-1")
    requests = [
        JobRequest("report", args={"i": 0}),
        JobRequest("report", dedup_key="k-1"),  # exists already
        JobRequest("report", dedup_key="k-2", priority=7),
        JobRequest("report", dedup_key="k-2"),  # same key earlier in this call
        JobRequest("report", tenant="acme", max_attempts=9),
    ]
    with engine.begin() as conn:
        got = enqueue_many(conn, requests)
    assert [g.created for g in got] == [True, False, True, False, True]
    assert got[1].job_id == first.job_id
    assert got[3].job_id == got[2].job_id
    with engine.connect() as conn:
        rows = {
            r.job_id: r
            for r in conn.execute(select(jobs.c.job_id, jobs.c.priority, jobs.c.max_attempts))
        }
    assert len(rows) == 4
    assert rows[got[2].job_id].priority == 7
    assert rows[got[4].job_id].max_attempts == 9
    assert rows[got[0].job_id].max_attempts == 3  # the job type's


@pytest.mark.parametrize("shape", ["all-equal", "all-different", "mixed"])
def test_enqueue_many_stores_every_column_of_every_row(with_job_type: Engine, shape: str) -> None:
    """Columns whose value the whole batch shares travel once (PostgreSQL); each row's
    own value must still land in its own row, whatever mix of shared and own."""
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    n = 5

    def value(i: int, options: list[object]) -> object:
        if shape == "all-equal":
            return options[0]
        if shape == "all-different":
            return options[i % len(options)]
        return options[0] if i % 2 else options[i % len(options)]

    tenants: list[object] = ["acme", "globex", None, "initech", "umbrella"]
    priorities: list[object] = [3, -2, 0, 9, 1]
    afters: list[object] = [t0, None, t0 + timedelta(hours=1), t0 + timedelta(days=2), None]
    requests = [
        JobRequest(
            "report",
            args={"i": i},
            payload_ref=cast(str | None, value(i, ["s3://a", None, "s3://c", "s3://d", "e"])),
            tenant=cast(str | None, value(i, tenants)),
            concurrency_key=cast(str | None, value(i, [None, "k1", "k2", "k3", "k4"])),
            priority=cast(int | None, value(i, priorities)),
            max_attempts=cast(int | None, value(i, [2, 4, 6, 8, None])),
            run_after=cast(datetime | None, value(i, afters)),
        )
        for i in range(n)
    ]
    _assert_stored_as_requested(with_job_type, requests, before=t0)


def _assert_stored_as_requested(
    engine: Engine, requests: list[JobRequest], *, before: datetime
) -> None:
    """``enqueue_many`` of ``requests`` (of "report": priority 0, 3 attempts) made
    one new QUEUED row per request, in order, each holding that request's values;
    a ``run_after`` of None is now, by the database clock (earlier than ``before``)."""
    with engine.begin() as conn:
        got = enqueue_many(conn, requests)
    assert len(got) == len(requests) and all(g.created for g in got)
    assert len({g.job_id for g in got}) == len(requests)
    with engine.connect() as conn:
        rows = {r.job_id: r for r in conn.execute(select(jobs))}
    assert len(rows) == len(requests)
    for request, g in zip(requests, got, strict=True):
        row = rows[g.job_id]
        assert row.args == request.args
        assert row.payload_ref == request.payload_ref
        assert row.tenant == request.tenant
        assert row.concurrency_key == request.concurrency_key
        assert row.priority == (0 if request.priority is None else request.priority)
        assert row.max_attempts == (3 if request.max_attempts is None else request.max_attempts)
        assert row.pool == "default" and row.state == "QUEUED"
        if request.run_after is not None:
            assert row.run_after == request.run_after
        else:
            assert row.run_after < before


def test_enqueue_many_with_a_session(with_job_type: Engine) -> None:
    with Session(with_job_type) as session:
        got = enqueue_many(session, [JobRequest("report"), JobRequest("report")])
        session.commit()
    assert len({g.job_id for g in got}) == 2
    assert _count(with_job_type) == 2


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (JobRequest("report", args=[1, 2]), "args must be a JSON object"),  # type: ignore[arg-type]
        (JobRequest("report", args={"a": float("nan")}), "JSON cannot represent"),
        (JobRequest("report", args={1: "x"}), "keys must be strings"),  # type: ignore[dict-item]
        (JobRequest("report", args={"a": object()}), "not JSON"),
        (JobRequest("report", args={"a": 10**400}), "too large"),
        (JobRequest("report", payload_ref="s3://x\x00y"), "NUL"),
        (JobRequest("report", dedup_key="\ud800"), "lone surrogate"),
        (JobRequest("report", dedup_key="k" * 401), "at most 400"),
        (JobRequest("report", tenant="t" * 201), "at most 200"),
        (JobRequest("report", priority=10**20), "between"),
        (JobRequest("report", priority=True), "must be an integer"),
        (JobRequest("report", max_attempts=0), "between 1 and"),
        (JobRequest("report", run_after=datetime(2030, 1, 1)), "aware"),  # noqa: DTZ001
    ],
)
def test_bad_values_are_refused_before_anything_is_written(
    with_job_type: Engine, request_: JobRequest, message: str
) -> None:
    good = JobRequest("report", dedup_key="good")
    with pytest.raises(ValueError, match=message), with_job_type.begin() as conn:
        enqueue_many(conn, [good, request_])
    assert _count(with_job_type) == 0


def test_deeply_nested_args_are_refused(with_job_type: Engine) -> None:
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(10_000):
        cur["a"] = {}
        cur = cur["a"]  # type: ignore[assignment]
    with pytest.raises(ValueError, match="nested deeper"), with_job_type.begin() as conn:
        enqueue(conn, "report", args=deep)


def test_public_api_is_importable_from_rota() -> None:
    import rota

    for name in ("enqueue", "enqueue_many", "RetryableError", "PermanentError", "AmbiguousError"):
        assert hasattr(rota, name)
    assert rota.JobContext.__name__ == "JobContext"
    assert rota.__version__.count(".") == 2


def test_an_engine_instead_of_a_connection_is_refused_clearly(with_job_type: Engine) -> None:
    with pytest.raises(TypeError, match="Connection or Session, got Engine"):
        enqueue(cast(Connection, with_job_type), "report")
    assert _count(with_job_type) == 0


def test_the_api_types_stay_dataclasses(with_job_type: Engine) -> None:
    # Applications copy requests with dataclasses.replace and serialise results as objects.
    request = dataclasses.replace(JobRequest("report"), priority=3)
    with with_job_type.begin() as conn:
        (result,) = enqueue_many(conn, [request])
    assert dataclasses.asdict(result) == {"job_id": result.job_id, "created": True}


# -- big batches: on PostgreSQL, sent in pipelined INSERTs of PIPELINE_BATCH (the first smaller)

BIG = 4 * PIPELINE_BATCH + 7  # five INSERTs (the first of FIRST_PIPELINE_BATCH), the last one short


@pytest.mark.parametrize("position", [0, PIPELINE_BATCH + 1, BIG - 1])
def test_a_bad_value_anywhere_in_a_big_batch_leaves_nothing_though_the_caller_commits(
    with_job_type: Engine, position: int
) -> None:
    """Checked batch by batch while earlier ones are inserted: those are taken back."""
    requests = [JobRequest("report", args={"i": i}) for i in range(BIG)]
    requests[position] = JobRequest("report", args={"i": float("nan")})
    with with_job_type.begin() as conn:
        with pytest.raises(ValueError, match=f"^request {position}: .*JSON cannot represent"):
            enqueue_many(conn, requests)
        # The caller's transaction goes on, and what it does next is kept.
        enqueue(conn, "report", dedup_key="the caller's next job")
    with with_job_type.connect() as conn:
        keys = conn.execute(select(jobs.c.dedup_key)).scalars().all()
    assert keys == ["the caller's next job"]


def test_a_big_batch_is_stored_whole_each_row_with_its_own_values(with_job_type: Engine) -> None:
    # Columns shared by one INSERT's rows but not the next one's, and the reverse.
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    requests = [
        JobRequest(
            "report",
            args={"i": i},
            tenant=None if i < 2 * PIPELINE_BATCH else f"t{i % 3}",
            priority=i % 7 if i < PIPELINE_BATCH else 1,
            run_after=t0 + timedelta(seconds=i) if i % 2 else None,
        )
        for i in range(BIG)
    ]
    _assert_stored_as_requested(with_job_type, requests, before=t0)


def test_a_bad_value_in_a_big_batch_on_an_autocommit_connection_leaves_nothing(
    with_job_type: Engine,
) -> None:
    """No transaction to take batches back in: every value is checked before the
    first statement (on PostgreSQL, one statement)."""
    requests = [JobRequest("report", args={"i": i}) for i in range(BIG)]
    bad = [*requests[:-1], JobRequest("report", priority=10**20)]
    autocommit = with_job_type.execution_options(isolation_level="AUTOCOMMIT")
    with autocommit.connect() as conn, pytest.raises(ValueError, match=f"^request {BIG - 1}: "):
        enqueue_many(conn, bad)
    assert _count(with_job_type) == 0
    with autocommit.connect() as conn:
        assert len(enqueue_many(conn, requests)) == BIG
    assert _count(with_job_type) == BIG


def test_a_big_batch_with_a_session(with_job_type: Engine) -> None:
    with Session(with_job_type) as session:
        got = enqueue_many(session, [JobRequest("report") for _ in range(BIG)])
        session.commit()
    assert len({g.job_id for g in got}) == BIG
    assert _count(with_job_type) == BIG


def test_a_database_error_in_a_big_batch_is_raised_as_sqlalchemy_raises_it(
    fresh_pg_url: str,
) -> None:
    """Refused by PostgreSQL (here a constraint the operator added), not by rota's checks."""
    engine = make_engine(fresh_pg_url)
    try:
        _refused_by_the_database(with_job_type(engine))
    finally:
        engine.dispose()


def _refused_by_the_database(with_job_type: Engine) -> None:
    with with_job_type.begin() as conn:
        conn.exec_driver_sql(
            "ALTER TABLE jobs ADD CONSTRAINT no_777 CHECK ((args->>'i') IS DISTINCT FROM '777')"
        )
    requests = [JobRequest("report", args={"i": i}) for i in range(BIG)]
    with pytest.raises(IntegrityError, match="no_777") as caught, with_job_type.begin() as conn:
        enqueue_many(conn, requests)
    assert getattr(caught.value.orig, "sqlstate", None) == "23514"  # check_violation
    assert _count(with_job_type) == 0


def test_a_refused_batch_outranks_a_later_bad_value(fresh_pg_url: str) -> None:
    """The database refused an early INSERT, then a later request is bad: the
    caller must hear the database's error, for its transaction cannot commit
    (a ValueError would let it "commit", which PostgreSQL turns into a
    rollback of everything the caller wrote)."""
    engine = make_engine(fresh_pg_url)
    try:
        with_job_type(engine)
        first_of_the_fifth = FIRST_PIPELINE_BATCH + 3 * PIPELINE_BATCH
        last_of_the_fourth = first_of_the_fifth - 1
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE orders (id integer)")
            conn.exec_driver_sql(
                "ALTER TABLE jobs ADD CONSTRAINT refused CHECK "
                f"((args->>'i') IS DISTINCT FROM '{last_of_the_fourth}')"
            )
        # The last row of the fourth INSERT is refused; the fifth's first request
        # is bad, found while the database still inserts the fourth.
        requests = [JobRequest("report", args={"i": i}) for i in range(BIG)]
        requests[first_of_the_fifth] = JobRequest("report", priority=10**20)
        with pytest.raises(IntegrityError, match="refused"), engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO orders VALUES (42)")
            # A caller following the README catches ValueError, then commits.
            with contextlib.suppress(ValueError):
                enqueue_many(conn, requests)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM orders").scalar_one() == 0
        assert _count(engine) == 0
    finally:
        engine.dispose()


class _EndsTheSession(Mapping[str, object]):
    """Args whose reading terminates the producer's database session (once)."""

    def __init__(self, engine: Engine, pid: int) -> None:
        self.engine, self.pid, self.done = engine, pid, False

    def __iter__(self) -> Iterator[str]:
        if not self.done:
            self.done = True
            with self.engine.connect() as other:
                other.exec_driver_sql(f"SELECT pg_terminate_backend({self.pid})")
        return iter(["i"])

    def __getitem__(self, key: str) -> object:
        return 1

    def __len__(self) -> int:
        return 1


def test_a_connection_lost_mid_batch_is_reported_and_invalidated_as_sqlalchemy_does(
    fresh_pg_url: str,
) -> None:
    engine = make_engine(fresh_pg_url)
    try:
        with_job_type(engine)
        requests = [JobRequest("report", args={"i": i}) for i in range(BIG)]
        with engine.connect() as conn:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            conn.commit()
            requests[PIPELINE_BATCH + 50] = JobRequest("report", args=_EndsTheSession(engine, pid))
            with pytest.raises(OperationalError) as caught:
                enqueue_many(conn, requests)
            assert caught.value.connection_invalidated
            assert conn.invalidated
            conn.rollback()  # what `with engine.begin()` does next: quietly, not a second error
        assert _count(engine) == 0
        with engine.connect() as conn:  # the pool hands out a working connection
            assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
    finally:
        engine.dispose()


def test_args_may_be_any_mapping_at_any_depth(with_job_type: Engine) -> None:
    """``args`` is typed ``Mapping``: a read-only view (a config's) is stored as its dict."""
    args = MappingProxyType({"a": {"b": 1}, "c": MappingProxyType({"d": [1, "x"]})})
    with with_job_type.begin() as conn:
        job = enqueue(conn, "report", args=args)
    with with_job_type.connect() as conn:
        stored = conn.execute(select(jobs.c.args).where(jobs.c.job_id == job.job_id)).scalar_one()
    assert stored == {"a": {"b": 1}, "c": {"d": [1, "x"]}}
