"""Reporting how attempts ended: one fenced statement for a whole batch.

``finish_if_lease_held`` writes the outcome of many attempts at once (success,
retry, failure, cancel acknowledgement, graceful release). Each row of the
batch is fenced on its own: the job must still be in RUNNING or
CANCEL_REQUESTED, owned by this worker, at the generation the worker claimed.
The attempt's ``job_attempts`` row is closed, and a scheduled job's end
recorded in ``schedule_outcomes`` (``rota.core.queries.schedule_outcomes``), in
the same statement on PostgreSQL (data-modifying CTEs) and the same
transaction on SQLite. On
PostgreSQL a batch of plain successes (the common case) takes a narrower
statement with two arrays (ids, generations) instead of nine; the fence is the
same. On SQLite the batch is materialised first, so each row is found by its
primary key (not every held row matched against the whole batch). The ids
that are *not* returned lost their lease: the caller reports nothing more
for them: ``finish_if_lease_held`` returns a ``LeaseLost`` for each of them.

Rules applied per row, in SQL, against the row as it is now:

* a job whose cancellation was requested meanwhile goes to CANCELLED instead of
  RETRY_WAIT or QUEUED (the requester wanted it stopped); SUCCEEDED and FAILED
  stand, since the work did finish or did fail;
* CANCELLED is written only for a job in CANCEL_REQUESTED: a worker cannot
  cancel a job nobody asked to cancel;
* ``refund`` gives the attempt back (graceful release costs no attempt);
* the attempt's ``output`` (the tail of what its handler wrote), when it has
  one, becomes its ``job_attempt_output`` row, in the same statement
  (PostgreSQL) or transaction (SQLite), for the rows the fence let through only.
* progress the handler reported after the last heartbeat is stored with the
  outcome (a field left None keeps the row's value).

Every text value is made storable before it is bound (``core.storable``:
cut to its column with a marker, NUL and lone surrogates replaced), so a
handler's words cannot make the database refuse the batch; the check costs
next to nothing for text that is already fine, and plain successes carry none.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import Connection, TextClause, text

from rota.core.queries.attempt_output import SQLITE_KEEP_OUTPUT, pg_keep_output
from rota.core.queries.fence import PG_BATCH_COLUMNS, lease_fence, pg_batch_fence
from rota.core.queries.schedule_outcomes import pg_record_outcomes, record_outcomes_of
from rota.core.queries.server_functions import ServerFunction
from rota.core.queries.sqlparams import (
    PG_NOW,
    SQLITE_NOW,
    bind_now,
    is_pg,
    pg_now_plus,
    read_id,
    sqlite_batch,
    sqlite_now_plus,
)
from rota.core.states import TERMINAL, TERMINAL_SQL, AttemptOutcome, JobState, sql_in
from rota.core.storable import (
    ATTEMPT_OUTPUT_MAX_BYTES,
    ERROR_CODE_MAX,
    ERROR_DETAIL_MAX,
    RESULT_REF_MAX,
    storable_text,
)

# Where a worker hands a job back to the queue (a retry, a release): a job whose
# cancellation was requested meanwhile goes to CANCELLED instead.
_BACK_IN_QUEUE = sql_in((JobState.RETRY_WAIT, JobState.QUEUED))


class Finish(NamedTuple):  # a named tuple: one per job, at a fifth of a frozen dataclass's cost
    """The end of one attempt, as the worker saw it.

    ``state`` is where a RUNNING job goes; ``delay_seconds`` sets ``run_after``
    to database now + delay (None keeps it); ``error_code`` None keeps the
    row's last error; ``needs_reconcile`` None keeps the flag.
    """

    job_id: uuid.UUID
    generation: int
    state: JobState
    outcome: AttemptOutcome
    error_code: str | None = None
    error_detail: str | None = None
    delay_seconds: float | None = None
    refund: bool = False
    needs_reconcile: bool | None = None
    result_ref: str | None = None  # where a successful job's result lives (None keeps it)
    output: str | None = None  # the tail of what the attempt's handler wrote (None: nothing)
    output_dropped: int = 0  # bytes written before that tail
    # The handler's last progress, not yet sent with a heartbeat (None keeps a field).
    progress_stage: str | None = None
    progress_done: int | None = None
    progress_total: int | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The outcome was written; ``state`` is where the job went."""

    job_id: uuid.UUID
    state: JobState


@dataclass(frozen=True, slots=True)
class LeaseLost:
    """The fence matched no row: this worker no longer holds the job at that generation."""

    job_id: uuid.UUID
    generation: int


Written = Finished | LeaseLost


def _new_state(j: str) -> str:
    return (
        f"CASE WHEN {j}.state = 'CANCEL_REQUESTED' AND b.target IN {_BACK_IN_QUEUE} "
        "THEN 'CANCELLED' ELSE b.target END"
    )


def _set_clause(j: str, now: str, now_plus_delay: str) -> str:
    return f"""
            state = {_new_state(j)},
            attempt_count = {j}.attempt_count - b.refund,
            run_after = CASE WHEN b.delay IS NULL THEN {j}.run_after ELSE {now_plus_delay} END,
            lease_owner = NULL,
            lease_expires_at = NULL,
            last_error_code = coalesce(b.code, {j}.last_error_code),
            last_error_detail = CASE WHEN b.code IS NULL THEN {j}.last_error_detail
                                     ELSE b.detail END,
            needs_reconcile = coalesce(b.reconcile, {j}.needs_reconcile),
            result_ref = coalesce(b.result_ref, {j}.result_ref),
            progress_stage = coalesce(b.stage, {j}.progress_stage),
            progress_done = coalesce(b.done, {j}.progress_done),
            progress_total = coalesce(b.total, {j}.progress_total),
            finished_at = CASE WHEN {_new_state(j)} IN {TERMINAL_SQL} THEN {now} ELSE NULL END,
            updated_at = {now}"""


def _fence(j: str, pg: bool = False) -> str:
    """The lease fence, and: only a job whose cancellation was requested becomes CANCELLED."""
    fence = pg_batch_fence(j) if pg else lease_fence(j)
    return f"{fence} AND (b.target <> 'CANCELLED' OR {j}.state = 'CANCEL_REQUESTED')"


@cache
def _pg_finish() -> TextClause:
    return text(f"""
        WITH b AS MATERIALIZED (
            SELECT *, {PG_BATCH_COLUMNS} FROM unnest(
                CAST(:ids AS uuid[]), CAST(:gens AS bigint[]), CAST(:targets AS text[]),
                CAST(:outcomes AS text[]), CAST(:codes AS text[]), CAST(:details AS text[]),
                CAST(:delays AS double precision[]), CAST(:refunds AS integer[]),
                CAST(:reconciles AS boolean[]), CAST(:results AS text[]),
                CAST(:outputs AS text[]), CAST(:dropped AS bigint[]),
                CAST(:stages AS text[]), CAST(:dones AS bigint[]), CAST(:totals AS bigint[])
            ) AS b(job_id, gen, target, outcome, code, detail, delay, refund, reconcile,
                   result_ref, output, dropped, stage, done, total)
        ),
        done AS (
            UPDATE jobs AS j SET {_set_clause("j", PG_NOW, pg_now_plus("b.delay"))}
            FROM b
            WHERE {_fence("j", pg=True)}
            RETURNING j.job_id, j.lease_generation, j.state, b.outcome, b.code, b.detail,
                      b.output, b.dropped, j.schedule_name, j.scheduled_for, j.finished_at
        ),
        closed AS (
            -- The batch row comes back with its job: joining done to b again was
            -- planned as one row against ten and compared every pair.
            UPDATE job_attempts AS a
            SET ended_at = {PG_NOW},
                outcome = CASE WHEN done.state = 'CANCELLED' THEN 'CANCELLED'
                               ELSE done.outcome END,
                error_code = done.code,
                error_detail = done.detail
            FROM done
            WHERE a.job_id = done.job_id AND a.lease_generation = done.lease_generation
        ),
        {pg_keep_output("done")},
        {pg_record_outcomes("done")}
        SELECT job_id, lease_generation, state FROM done
    """)


@cache
def _pg_succeed() -> TextClause:
    """The common case, plain successes: two arrays instead of nine, same fence."""
    return text(f"""
        WITH b AS MATERIALIZED (
            SELECT *, {PG_BATCH_COLUMNS}
            FROM unnest(CAST(:ids AS uuid[]), CAST(:gens AS bigint[])) AS b(job_id, gen)
        ),
        done AS (
            UPDATE jobs AS j
            SET state = 'SUCCEEDED',
                lease_owner = NULL,
                lease_expires_at = NULL,
                needs_reconcile = FALSE,
                finished_at = {PG_NOW},
                updated_at = {PG_NOW}
            FROM b
            WHERE {pg_batch_fence("j")}
            RETURNING j.job_id, j.lease_generation, j.state, j.schedule_name, j.scheduled_for,
                      j.finished_at
        ),
        closed AS (
            UPDATE job_attempts AS a
            SET ended_at = {PG_NOW}, outcome = 'SUCCEEDED', error_code = NULL, error_detail = NULL
            FROM done
            WHERE a.job_id = done.job_id AND a.lease_generation = done.lease_generation
        ),
        {pg_record_outcomes("done")}
        SELECT job_id, lease_generation, state FROM done
    """)


_TS = "timestamptz"
_WRITTEN = (("job_id", "uuid"), ("lease_generation", "bigint"), ("state", "varchar"))
SUCCEED = ServerFunction(
    "succeed",
    _pg_succeed(),
    params=(("owner", "text"), ("now", _TS), ("ids", "uuid[]"), ("gens", "bigint[]")),
    returns=_WRITTEN,
)
FINISH = ServerFunction(
    "finish",
    _pg_finish(),
    params=(
        ("owner", "text"),
        ("now", _TS),
        ("ids", "uuid[]"),
        ("gens", "bigint[]"),
        ("targets", "text[]"),
        ("outcomes", "text[]"),
        ("codes", "text[]"),
        ("details", "text[]"),
        ("delays", "double precision[]"),
        ("refunds", "integer[]"),
        ("reconciles", "boolean[]"),
        ("results", "text[]"),
        ("outputs", "text[]"),
        ("dropped", "bigint[]"),
        ("stages", "text[]"),
        ("dones", "bigint[]"),
        ("totals", "bigint[]"),
    ),
    returns=_WRITTEN,
)


def _plain_success(f: Finish) -> bool:
    return (
        f.state is JobState.SUCCEEDED
        and f.outcome is AttemptOutcome.SUCCEEDED
        and f.error_code is None
        and f.error_detail is None
        and f.delay_seconds is None
        and not f.refund
        and f.needs_reconcile is False
        and f.result_ref is None
        and f.output is None
        and f.progress_stage is None
        and f.progress_done is None
        and f.progress_total is None
    )


@cache
def _sqlite_finish() -> TextClause:
    return text(f"""
        WITH b AS MATERIALIZED (
            SELECT json_extract(value, '$.id') AS job_id,
                   json_extract(value, '$.gen') AS gen,
                   json_extract(value, '$.target') AS target,
                   json_extract(value, '$.code') AS code,
                   json_extract(value, '$.detail') AS detail,
                   json_extract(value, '$.delay') AS delay,
                   json_extract(value, '$.refund') AS refund,
                   json_extract(value, '$.reconcile') AS reconcile,
                   json_extract(value, '$.result') AS result_ref,
                   json_extract(value, '$.stage') AS stage,
                   json_extract(value, '$.done') AS done,
                   json_extract(value, '$.total') AS total
            FROM json_each(:batch)
        )
        UPDATE jobs SET {_set_clause("jobs", SQLITE_NOW, sqlite_now_plus("b.delay"))}
        FROM b
        WHERE {_fence("jobs")}
        RETURNING jobs.job_id, jobs.lease_generation, jobs.state
    """)


_SQLITE_CLOSE_ATTEMPTS = text(f"""
    UPDATE job_attempts
    SET ended_at = {SQLITE_NOW},
        outcome = json_extract(b.value, '$.outcome'),
        error_code = json_extract(b.value, '$.code'),
        error_detail = json_extract(b.value, '$.detail')
    FROM json_each(:batch) AS b
    WHERE job_attempts.job_id = json_extract(b.value, '$.id')
      AND job_attempts.lease_generation = json_extract(b.value, '$.gen')
""")


def finish_if_lease_held(
    conn: Connection, *, owner: str, finishes: Sequence[Finish], now: datetime | None = None
) -> list[Written]:
    """Write each outcome whose lease ``owner`` still holds; one result per finish, in order.

    A finish is written for its job and generation: a stale copy of a job's
    outcome (an older generation) in the same batch is ``LeaseLost``, and of
    two for the same generation the first is written (both report it).
    """
    rows = _finish(conn, owner, _first_per_lease(finishes), now)
    return [
        rows.get((f.job_id, f.generation)) or LeaseLost(f.job_id, f.generation) for f in finishes
    ]


def _first_per_lease(finishes: Sequence[Finish]) -> list[Finish]:
    """One finish per (job, generation): an UPDATE joined with two would take either."""
    seen: set[tuple[uuid.UUID, int]] = set()
    unique = []
    for f in finishes:
        key = (f.job_id, f.generation)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def complete_if_lease_held(
    conn: Connection,
    *,
    owner: str,
    job_id: uuid.UUID,
    generation: int,
    now: datetime | None = None,
) -> Written:
    finish = Finish(
        job_id, generation, JobState.SUCCEEDED, AttemptOutcome.SUCCEEDED, needs_reconcile=False
    )
    return finish_if_lease_held(conn, owner=owner, finishes=[finish], now=now)[0]


def acknowledge_cancel_if_lease_held(
    conn: Connection,
    *,
    owner: str,
    job_id: uuid.UUID,
    generation: int,
    now: datetime | None = None,
) -> Written:
    finish = Finish(job_id, generation, JobState.CANCELLED, AttemptOutcome.CANCELLED)
    return finish_if_lease_held(conn, owner=owner, finishes=[finish], now=now)[0]


def release_if_lease_held(
    conn: Connection,
    *,
    owner: str,
    job_id: uuid.UUID,
    generation: int,
    now: datetime | None = None,
) -> Written:
    """Back to QUEUED, due now, the attempt refunded (graceful shutdown)."""
    finish = Finish(
        job_id, generation, JobState.QUEUED, AttemptOutcome.RELEASED, delay_seconds=0.0, refund=True
    )
    return finish_if_lease_held(conn, owner=owner, finishes=[finish], now=now)[0]


def _storable(f: Finish) -> Finish:
    """``f`` with every text value storable (``f`` itself when it already is)."""
    code, detail, result, output = f.error_code, f.error_detail, f.result_ref, f.output
    if code is not None:
        code = storable_text(code, ERROR_CODE_MAX)
    if detail is not None:
        detail = storable_text(detail, ERROR_DETAIL_MAX, keep="middle")
    if result is not None:
        result = storable_text(result, RESULT_REF_MAX)
    if output is not None:
        # Characters, and the executor keeps at most this many bytes: only a cut
        # of its own making is ever longer.
        output = storable_text(output, ATTEMPT_OUTPUT_MAX_BYTES, keep="tail")
    if (
        code is f.error_code
        and detail is f.error_detail
        and result is f.result_ref
        and output is f.output
    ):
        return f
    return f._replace(error_code=code, error_detail=detail, result_ref=result, output=output)


def _finish(
    conn: Connection, owner: str, finishes: Sequence[Finish], now: datetime | None
) -> dict[tuple[uuid.UUID, int], Finished]:
    """The finishes written, by (job, generation); ``finishes`` has one per pair."""
    if not finishes:
        return {}
    if is_pg(conn):
        if all(_plain_success(f) for f in finishes):  # no text to make storable
            rows = SUCCEED.execute(
                conn,
                {
                    "owner": owner,
                    "now": bind_now(conn, now),
                    "ids": [f.job_id for f in finishes],
                    "gens": [f.generation for f in finishes],
                },
            )
            return _written(rows)
        finishes = [_storable(f) for f in finishes]
        rows = FINISH.execute(
            conn,
            {
                "owner": owner,
                "now": bind_now(conn, now),
                "ids": [f.job_id for f in finishes],
                "gens": [f.generation for f in finishes],
                "targets": [f.state.value for f in finishes],
                "outcomes": [f.outcome.value for f in finishes],
                "codes": [f.error_code for f in finishes],
                "details": [f.error_detail for f in finishes],
                "delays": [f.delay_seconds for f in finishes],
                "refunds": [1 if f.refund else 0 for f in finishes],
                "reconciles": [f.needs_reconcile for f in finishes],
                "results": [f.result_ref for f in finishes],
                "outputs": [f.output for f in finishes],
                "dropped": [f.output_dropped for f in finishes],
                "stages": [f.progress_stage for f in finishes],
                "dones": [f.progress_done for f in finishes],
                "totals": [f.progress_total for f in finishes],
            },
        )
        return _written(rows)
    finishes = [_storable(f) for f in finishes]
    batch = [
        {
            "id": f.job_id.hex,
            "gen": f.generation,
            "target": f.state.value,
            "code": f.error_code,
            "detail": f.error_detail,
            "delay": f.delay_seconds,
            "refund": 1 if f.refund else 0,
            "reconcile": f.needs_reconcile,
            "result": f.result_ref,
            "stage": f.progress_stage,
            "done": f.progress_done,
            "total": f.progress_total,
        }
        for f in finishes
    ]
    params: dict[str, Any] = {"owner": owner, "now": bind_now(conn, now)}
    rows = conn.execute(_sqlite_finish(), {**params, "batch": sqlite_batch(batch)}).all()
    if not rows:
        return {}
    by_lease = {(f.job_id.hex, f.generation): f for f in finishes}
    closed = []
    kept = []
    for r in rows:
        f = by_lease[(r[0], int(r[1]))]
        outcome = AttemptOutcome.CANCELLED if r[2] == JobState.CANCELLED else f.outcome
        closed.append(
            {
                "id": r[0],
                "gen": int(r[1]),
                "outcome": outcome.value,
                "code": f.error_code,
                "detail": f.error_detail,
            }
        )
        if f.output is not None:
            kept.append(
                {"id": r[0], "gen": int(r[1]), "output": f.output, "dropped": f.output_dropped}
            )
    conn.execute(_SQLITE_CLOSE_ATTEMPTS, {"now": params["now"], "batch": sqlite_batch(closed)})
    if kept:
        conn.execute(SQLITE_KEEP_OUTPUT, {"batch": sqlite_batch(kept)})
    ended = [read_id(r[0]) for r in rows if r[2] in TERMINAL]
    record_outcomes_of(conn, ended)
    return _written(rows)


def _written(rows: Sequence[Any]) -> dict[tuple[uuid.UUID, int], Finished]:
    """Rows of (job_id, lease_generation, state), as the statements return them."""
    written = {}
    for r in rows:
        job_id = read_id(r[0])
        written[(job_id, int(r[1]))] = Finished(job_id, JobState(r[2]))
    return written
