"""Reading one attempt's output (``job_attempt_output``).

A running attempt's row is written with its lease renewals (``jobs_lease``),
each tail replacing the last, then with its outcome (``jobs_outcome``), which
replaces it in turn (``KEEP_OUTPUT_CONFLICT``); the rows are deleted with the
job (``jobs_prune``). Attempts
are numbered as people count them: 1 for the job's first attempt row, in the
order they started (the order of their lease generations, which every claim
raises), whatever their outcome, a release at shutdown included.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, select

from rota.core.storable import BIGINT_MAX
from rota.core.tables import job_attempt_output, job_attempts

# How a write of an attempt's output meets the row a renewal kept before: replaced.
KEEP_OUTPUT_CONFLICT = """
        ON CONFLICT (job_id, lease_generation) DO UPDATE
        SET output = excluded.output, dropped_bytes = excluded.dropped_bytes"""


@dataclass(frozen=True)
class AttemptOutput:
    number: int  # 1 for the job's first attempt
    lease_generation: int
    outcome: str | None  # None while the attempt runs
    output: str  # "" when the attempt wrote nothing (while it runs: nothing renewed yet)
    dropped_bytes: int  # bytes written before ``output``, not kept


def attempt_output(
    conn: Connection, job_id: uuid.UUID, number: int | None = None
) -> AttemptOutput | None:
    """The output of the job's attempt ``number`` (None: its latest); None if there is none."""
    if number is None:
        count = conn.execute(
            select(func.count()).select_from(job_attempts).where(job_attempts.c.job_id == job_id)
        ).scalar_one()
        number = int(count)
    if not 1 <= number <= BIGINT_MAX:
        return None
    a, o = job_attempts, job_attempt_output
    stmt = (
        select(a.c.lease_generation, a.c.outcome, o.c.output, o.c.dropped_bytes)
        .select_from(
            a.outerjoin(
                o, and_(o.c.job_id == a.c.job_id, o.c.lease_generation == a.c.lease_generation)
            )
        )
        .where(a.c.job_id == job_id)
        .order_by(a.c.lease_generation)
        .limit(1)
        .offset(number - 1)
    )
    row = conn.execute(stmt).first()
    if row is None:
        return None
    generation, outcome, output, dropped = row
    return AttemptOutput(number, int(generation), outcome, output or "", int(dropped or 0))
