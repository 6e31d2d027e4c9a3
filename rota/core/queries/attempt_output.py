"""Reading one attempt's output (``job_attempt_output``).

A running attempt's row is written with its lease renewals (``jobs_lease``),
each tail replacing the last, then with its outcome (``jobs_outcome``), which
replaces it in turn (``pg_keep_output``, ``SQLITE_KEEP_OUTPUT``: the writes of
both); the rows are deleted with the job (``jobs_prune``). Attempts
are numbered as people count them: 1 for the job's first attempt row, in the
order they started (the order of their lease generations, which every claim
raises), whatever their outcome, a release at shutdown included.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, select, text

from rota.core.storable import BIGINT_MAX
from rota.core.tables import job_attempt_output, job_attempts

# How a write of an attempt's output meets the row a renewal kept before: replaced.
_REPLACED = """
        ON CONFLICT (job_id, lease_generation) DO UPDATE
        SET output = excluded.output, dropped_bytes = excluded.dropped_bytes"""


def pg_keep_output(source: str) -> str:
    """``kept AS (...)``: the CTE that writes the output of ``source``'s rows (columns
    job_id, lease_generation, output, dropped) that carry one, for a PostgreSQL
    statement whose ``source`` holds only the leases its fence let through."""
    return f"""kept AS (
            INSERT INTO job_attempt_output (job_id, lease_generation, output, dropped_bytes)
            SELECT job_id, lease_generation, output, dropped FROM {source}
            WHERE output IS NOT NULL{_REPLACED}
        )"""


# SQLite's: a second statement in the writer's transaction, for a JSON batch of
# {id, gen, output, dropped} holding only the leases the fence let through.
SQLITE_KEEP_OUTPUT = text(f"""
    INSERT INTO job_attempt_output (job_id, lease_generation, output, dropped_bytes)
    SELECT json_extract(value, '$.id'), json_extract(value, '$.gen'),
           json_extract(value, '$.output'), json_extract(value, '$.dropped')
    FROM json_each(:batch) WHERE true{_REPLACED}
""")


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
