"""Values a handler controls are made storable, and one bad row never blocks a batch.

Both backends: error codes, messages and progress stages that do not fit their
column (or hold NUL, or a lone surrogate) are cut or repaired; a row the
database still refuses is split out of its batch (outcomes and renewals) and
fails alone; exceptions outside the handler (args that are not an object, a
job-type reload failing right after a claim) still give the job an outcome.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text, update
from sqlalchemy.exc import OperationalError

from rota.core.config import JobTypeSpec
from rota.core.database import make_engine
from rota.core.queries.jobs_outcome import Finish
from rota.core.states import AttemptOutcome, JobState
from rota.core.storable import (
    ERROR_CODE_MAX,
    ERROR_DETAIL_MAX,
    PROGRESS_STAGE_MAX,
    cut_text,
    storable_text,
)
from rota.core.tables import job_types, jobs
from rota.executor.context import JobContext
from rota.executor.heartbeat import Heartbeat
from rota.executor.lease import HeldJob
from rota.executor.service import Executor
from rota.executor.transactions import LoopConnection, refused_for_its_values
from rota.executor.writer import OutcomeWriter
from tests.support.executor_support import (
    SLOW_RETRY,
    StartExecutor,
    add_jobs,
    attempt_rows,
    claim_as,
    claimed_job,
    job_row,
    job_type,
    states,
    store_types,
    wait_for,
)

H = "tests.handlers.hostile"
OWNER = "test:1:values"


def refuse_in_database(engine: Engine, column: str, value: str) -> None:
    """Make the database itself refuse to write ``value`` into ``jobs.column``.

    A real refusal (a CHECK constraint, a trigger on SQLite), standing for any
    row a database turns down for what it holds.
    """
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(
                text(
                    f"ALTER TABLE jobs ADD CONSTRAINT refuse_{column} "
                    f"CHECK ({column} IS DISTINCT FROM '{value}')"
                )
            )
        else:
            conn.execute(
                text(
                    f"CREATE TRIGGER refuse_{column} BEFORE UPDATE ON jobs "
                    f"WHEN NEW.{column} = '{value}' "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
                )
            )


# -- the sanitiser -------------------------------------------------------------------


def test_storable_text_leaves_good_text_alone() -> None:
    good = "RATE_LIMITED: try later — 5 s"
    assert storable_text(good, 200) is good


def test_storable_text_cuts_with_a_visible_marker() -> None:
    cut = storable_text("X" * 250, 200)
    assert len(cut) == 200 and cut.startswith("X" * 150)
    assert cut.endswith("…[cut 65 chars]")  # 185 kept + 15 for the marker = 200
    tail = storable_text("a" * 100 + "THE END", 50, keep="tail")
    assert len(tail) == 50 and tail.endswith("THE END") and tail.startswith("…[cut ")
    huge = storable_text("M" * 10_000_000, ERROR_DETAIL_MAX, keep="tail")
    assert len(huge) == ERROR_DETAIL_MAX and "[cut 999" in huge
    assert cut_text("short", 10) == "short"


def test_storable_text_repairs_nul_and_surrogates() -> None:
    assert storable_text("a\x00b", 200) == "a\\x00b"
    assert storable_text("bad \udc80 text", 200) == "bad \ufffd text"
    assert storable_text("\ud83d\ude00", 200) == "\U0001f600"  # a pair is one character
    repaired = storable_text("\x00" * 100, 200)
    assert len(repaired) == 200 and repaired.endswith("chars]")
    for text_ in (repaired, storable_text("\udc80" * 300, 200)):
        text_.encode("utf-8")


def test_storable_text_of_hostile_objects() -> None:
    class StrRaises:
        def __str__(self) -> str:
            raise RuntimeError("no")

    class StrNotText:
        def __str__(self) -> Any:
            return 42

    assert storable_text(StrRaises(), 200) == "<StrRaises>"
    assert storable_text(StrNotText(), 200) == "<StrNotText>"
    assert storable_text(12345, 200) == "12345"


# -- outcomes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("handler", "state", "code_check"),
    [
        ("raise_long_code", "RETRY_WAIT", lambda c: c.startswith("X" * 150) and "[cut" in c),
        ("raise_nul_message", "RETRY_WAIT", lambda c: c == "ValueError"),
        ("raise_lone_surrogate", "RETRY_WAIT", lambda c: c == "ValueError"),
        ("raise_nul_code", "FAILED", lambda c: c == "BAD\\x00CODE"),
        ("raise_huge_message", "RETRY_WAIT", lambda c: c == "ValueError"),
    ],
)
def test_a_poisoned_outcome_fails_alone_and_its_batch_is_written(
    engine: Engine,
    start_executor: StartExecutor,
    handler: str,
    state: str,
    code_check: Callable[[str], bool],
) -> None:
    bad = job_type("bad", handler=f"{H}:{handler}", backoff=SLOW_RETRY)
    ok = job_type("ok", handler="tests.handlers.plain:noop")
    store_types(engine, bad, ok)
    (bad_id,) = add_jobs(engine, bad)
    ok_ids = add_jobs(engine, ok, 6)
    start_executor(concurrency=8)
    wait_for(lambda: set(states(engine, ok_ids).values()) == {"SUCCEEDED"}, what="bystanders")
    wait_for(lambda: job_row(engine, bad_id)["state"] == state, what=state)
    row = job_row(engine, bad_id)
    code, detail = row["last_error_code"], row["last_error_detail"]
    assert len(code) <= ERROR_CODE_MAX and code_check(code), code
    assert len(detail) <= ERROR_DETAIL_MAX and "\x00" not in detail
    (att,) = attempt_rows(engine, bad_id)
    assert att["error_code"] == code and att["ended_at"] is not None
    # The executor keeps working afterwards.
    (later,) = add_jobs(engine, ok)
    wait_for(lambda: job_row(engine, later)["state"] == "SUCCEEDED", what="a later job")


def test_refusals_are_told_apart_from_an_unreachable_database(engine: Engine) -> None:
    refusals = []
    for sql, value in [("SELECT CAST(:v AS bigint)", 2**64), ("SELECT :v", "bad \udc80")]:
        with pytest.raises(Exception) as caught, engine.connect() as conn:
            conn.execute(text(sql), {"v": value})
        refusals.append(caught.value)
    if engine.dialect.name == "postgresql":
        with pytest.raises(Exception) as caught, engine.connect() as conn:
            conn.execute(text("SELECT CAST(:v AS text)"), {"v": "a\x00b"})
        refusals.append(caught.value)
    assert [refused_for_its_values(e) for e in refusals] == [True] * len(refusals), refusals
    nowhere = make_engine("postgresql+psycopg://rota@127.0.0.1:1/rota")
    try:
        with pytest.raises(OperationalError) as unreachable, nowhere.connect():
            pass
    finally:
        nowhere.dispose()
    assert not refused_for_its_values(unreachable.value)


def _claimed_helds(engine: Engine, spec: JobTypeSpec, n: int) -> list[HeldJob]:
    add_jobs(engine, spec, n)
    claimed = claim_as(engine, OWNER, n)
    assert len(claimed) == n
    return [HeldJob(c, spec, renewed_at=time.monotonic()) for c in claimed]


def test_a_row_the_database_refuses_is_split_out_and_gets_a_fallback_outcome(
    engine: Engine,
) -> None:
    spec = job_type("w")
    store_types(engine, spec)
    helds = _claimed_helds(engine, spec, 7)
    refuse_in_database(engine, "last_error_code", "POISON")
    written: dict[uuid.UUID, JobState | None] = {}
    writer = OutcomeWriter(
        LoopConnection(engine), OWNER, lambda h, f, s: written.__setitem__(h.claimed.job_id, s)
    )
    poison = helds[3].claimed
    for h in helds:
        c = h.claimed
        if c is poison:
            f = Finish(
                c.job_id,
                c.lease_generation,
                JobState.RETRY_WAIT,
                AttemptOutcome.RETRY,
                "POISON",
                "the handler's own words",
                delay_seconds=60.0,
                needs_reconcile=False,
            )
        elif h is helds[0]:
            f = Finish(
                c.job_id,
                c.lease_generation,
                JobState.FAILED,
                AttemptOutcome.FAILED,
                "FINE",
                "failed, storably",
                needs_reconcile=False,
            )
        else:
            f = Finish(
                c.job_id,
                c.lease_generation,
                JobState.SUCCEEDED,
                AttemptOutcome.SUCCEEDED,
                needs_reconcile=False,
            )
        writer.submit(h, f)
    try:
        assert writer.flush_once() == 7
    finally:
        writer.stop(timeout=0)
    assert None not in written.values() and len(written) == 7
    rows = {h.claimed.job_id: job_row(engine, h.claimed.job_id) for h in helds}
    assert rows[helds[0].claimed.job_id]["last_error_code"] == "FINE"
    others = [h.claimed.job_id for h in helds[1:] if h.claimed is not poison]
    assert {rows[i]["state"] for i in others} == {"SUCCEEDED"}
    bad = rows[poison.job_id]
    assert bad["state"] == "RETRY_WAIT" and bad["lease_owner"] is None
    assert bad["last_error_code"] == "OUTCOME_UNSTORABLE"
    assert "POISON" in bad["last_error_detail"] and "refused" in bad["last_error_detail"]
    (att,) = attempt_rows(engine, poison.job_id)
    assert att["error_code"] == "OUTCOME_UNSTORABLE" and att["ended_at"] is not None


def test_a_row_whose_fallback_is_refused_too_is_given_up_locally(engine: Engine) -> None:
    """Nothing can be written for it: the worker stops holding it; the sweeper takes it back."""
    spec = job_type("w")
    store_types(engine, spec)
    helds = _claimed_helds(engine, spec, 3)
    refuse_in_database(engine, "last_error_code", "OUTCOME_UNSTORABLE")
    written: dict[uuid.UUID, JobState | None] = {}
    given_up: list[HeldJob] = []
    writer = OutcomeWriter(
        LoopConnection(engine),
        OWNER,
        lambda h, f, s: written.__setitem__(h.claimed.job_id, s),
        given_up.append,
    )
    for i, h in enumerate(helds):
        c = h.claimed
        code = "OUTCOME_UNSTORABLE" if i == 1 else "FINE"
        writer.submit(
            h,
            Finish(
                c.job_id,
                c.lease_generation,
                JobState.FAILED,
                AttemptOutcome.FAILED,
                code,
                "x",
                needs_reconcile=False,
            ),
        )
    try:
        writer.flush_once()
    finally:
        writer.stop(timeout=0)
    assert given_up == [helds[1]]  # the executor stops holding (and renewing) it
    assert job_row(engine, helds[1].claimed.job_id)["state"] == "RUNNING"  # for the sweeper
    assert written == {h.claimed.job_id: JobState.FAILED for h in (helds[0], helds[2])}


# -- progress ------------------------------------------------------------------------


def _context() -> JobContext:
    return JobContext.for_job(HeldJob(claimed_job(), None, renewed_at=time.monotonic()))


def test_progress_values_are_checked_and_cut_at_the_call() -> None:
    ctx = _context()
    ctx.progress(stage="S" * 250, done=3, total=2**63 - 1)
    r = ctx._held.renewal(time.monotonic())
    assert r.stage is not None and len(r.stage) == PROGRESS_STAGE_MAX and "[cut" in r.stage
    assert (r.done, r.total) == (3, 2**63 - 1)
    ctx.progress(stage="a\x00b\udc80")
    assert ctx._held.renewal(time.monotonic()).stage == "a\\x00b\ufffd"
    with pytest.raises(TypeError, match="stage"):
        ctx.progress(stage=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="done"):
        ctx.progress(done="three")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="total"):
        ctx.progress(total=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="done"):
        ctx.progress(done=True)
    with pytest.raises(ValueError, match="done"):
        ctx.progress(done=-1)
    with pytest.raises(ValueError, match="total"):
        ctx.progress(total=2**63)
    assert not ctx._held.has_progress  # a refused call records nothing


def test_a_long_progress_stage_costs_no_lease(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    until = tmp_path / "stop"
    lease = timedelta(seconds=2)
    talker = job_type("talk", handler=f"{H}:progress_long_stage", lease=lease)
    quiet = job_type("quiet", handler=f"{H}:wait_for_file", lease=lease)
    store_types(engine, talker, quiet)
    (t_id,) = add_jobs(engine, talker, args={"until": str(until)})
    q_ids = add_jobs(engine, quiet, 3, args={"until": str(until)})
    all_ids = [t_id, *q_ids]
    start_executor(concurrency=8)
    wait_for(lambda: job_row(engine, t_id)["progress_stage"], what="the stage stored")
    stage = job_row(engine, t_id)["progress_stage"]
    assert len(stage) == PROGRESS_STAGE_MAX and stage.endswith("chars]")
    # Every lease keeps being renewed: each heartbeat_at moves on, twice.
    for _ in range(2):
        seen = {i: job_row(engine, i)["heartbeat_at"] for i in all_ids}

        def all_renewed(seen: dict[uuid.UUID, Any] = seen) -> bool:
            now = {i: job_row(engine, i)["heartbeat_at"] for i in all_ids}
            return all(now[i] is not None and (seen[i] is None or now[i] > seen[i]) for i in now)

        wait_for(all_renewed, what="renewals of every lease")
    rows = [job_row(engine, i) for i in all_ids]
    assert {(r["state"], r["attempt_count"]) for r in rows} == {("RUNNING", 1)}
    until.write_text("")
    wait_for(lambda: set(states(engine, all_ids).values()) == {"SUCCEEDED"}, what="SUCCEEDED")


def test_a_wrong_progress_type_is_the_handlers_error(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = job_type("p", handler=f"{H}:progress_wrong_type", backoff=SLOW_RETRY)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(lambda: job_row(engine, job_id)["state"] == "RETRY_WAIT", what="RETRY_WAIT")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "TypeError" and "done" in row["last_error_detail"]


def test_a_renewal_the_database_refuses_does_not_block_the_others(engine: Engine) -> None:
    spec = job_type("r")
    store_types(engine, spec)
    helds = _claimed_helds(engine, spec, 4)
    refuse_in_database(engine, "progress_stage", "POISON")
    lost: list[HeldJob] = []
    hb = Heartbeat(
        LoopConnection(engine), OWNER, lambda: helds, lambda h, why: lost.append(h), lost.append
    )
    helds[0].set_progress("fine", 1, 4)
    helds[2].set_progress("POISON", 2, 4)
    try:
        assert hb.beat_once(force=True) == 4
    finally:
        hb.stop()
    assert lost == []
    rows = [job_row(engine, h.claimed.job_id) for h in helds]
    assert [r["heartbeat_at"] is not None for r in rows] == [True] * 4
    assert rows[0]["progress_stage"] == "fine"
    # The refused row's lease was renewed without its progress.
    assert rows[2]["progress_stage"] is None and rows[2]["progress_done"] is None


# -- exceptions outside the handler --------------------------------------------------


@pytest.mark.parametrize("args", [[1, 2], "just text", 5, True])
def test_args_that_are_not_an_object_fail_the_job_not_the_executor(
    engine: Engine, start_executor: StartExecutor, args: Any
) -> None:
    spec = job_type("a")
    store_types(engine, spec)
    (bad_id,) = add_jobs(engine, spec)
    ok_ids = add_jobs(engine, spec, 3)
    with engine.begin() as conn:  # written by hand, or before enqueue checked args
        conn.execute(update(jobs).where(jobs.c.job_id == bad_id).values(args=args))
    start_executor()
    wait_for(lambda: set(states(engine, ok_ids).values()) == {"SUCCEEDED"}, what="bystanders")
    wait_for(lambda: job_row(engine, bad_id)["state"] == "FAILED", what="FAILED")
    row = job_row(engine, bad_id)
    assert row["last_error_code"] == "BAD_ARGS"
    assert "JSON object" in row["last_error_detail"]


def test_a_job_type_reload_failing_right_after_a_claim_still_gives_an_outcome(
    engine: Engine,
) -> None:
    ex = Executor(engine, listen=False)
    ex.start()
    try:
        time.sleep(1.1)  # the cache reloads an unknown type at most once a second
        late = job_type("late")  # stored after the executor loaded its job types
        store_types(engine, late)
        with engine.begin() as conn:  # a definition nobody can read breaks the reload
            conn.execute(
                job_types.insert().values(
                    name="corrupt", pool="default", definition={}, updated_at=datetime.now(UTC)
                )
            )
        (job_id,) = add_jobs(engine, late)
        assert ex.claim_once() == 1
        assert ex.wait_idle(10)
    finally:
        ex.shutdown(drain_timeout=0)
    row = job_row(engine, job_id)
    assert row["state"] == "RETRY_WAIT" and row["last_error_code"] == "JOB_TYPE_UNAVAILABLE"
    assert "corrupt" in row["last_error_detail"] or "name" in row["last_error_detail"]
