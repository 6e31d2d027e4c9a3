"""The lease fence, written once: the predicate every write after a claim carries.

A worker may change a job it claimed only while the row still says it holds
the lease it was given: same job, same ``lease_generation`` (the fencing
token, raised by every claim), same owner, and a leased state (RUNNING or
CANCEL_REQUESTED). The check is inside the writing statement itself, so a
worker paused past its lease cannot write after another worker claimed the job,
and a stale thread of the same process (same owner name, older generation)
cannot either. Zero rows matched is the caller's ``LeaseLost``.

On PostgreSQL the batch is a ``MATERIALIZED`` CTE that carries the owner
too (``b.owner``), and the fence compares the row with the batch only: every
test is then a join condition and none a filter on ``jobs`` alone, so no
statistics can make the planner believe only a few rows qualify. With
filters on ``jobs`` (``lease_owner = :owner``, ``state IN ...``), a planner
whose statistics were taken while few leases were held scans every lease of
the owner and compares each with every batch row: 500 outcomes against 6,000
held leases take 1.5 s that way and 16 ms as a join, so outcomes pile up
behind it, more leases stay held, and the executors fall to a third of their
rate. The state test compares with the batch too (``b.leased``, always
true): the same fence, in a form no filter on ``jobs`` can be made of.

Renewals add ``lease_expires_at > now`` (a heartbeat never revives an expired
lease); outcome writes do not (a worker that finishes just after its expiry,
before anyone else claimed the job, still holds the current generation).
"""

from __future__ import annotations

from rota.core.states import LEASED_SQL


def lease_fence(
    j: str,
    *,
    job_id: str = "b.job_id",
    generation: str = "b.gen",
    owner: str = ":owner",
    leased: str | None = None,
) -> str:
    """The fence on table alias ``j`` against a batch row (``b``) and the ``:owner``
    parameter; ``leased``: the state test compared with that value instead of alone."""
    state = f"{j}.state IN {LEASED_SQL}"
    return (
        f"{j}.job_id = {job_id}"
        f"\n          AND {j}.lease_generation = {generation}"
        f"\n          AND {j}.lease_owner = {owner}"
        f"\n          AND {state if leased is None else f'({state}) = {leased}'}"
    )


def pg_batch_fence(j: str) -> str:
    """PostgreSQL's form of the fence, against a ``MATERIALIZED`` batch ``b`` with
    ``job_id``, ``gen`` and the ``PG_BATCH_COLUMNS``: join conditions only (see above)."""
    return lease_fence(j, owner="b.owner", leased="b.leased")


# The owner, and TRUE for the state test, as columns of the batch (``pg_batch_fence``).
PG_BATCH_COLUMNS = "CAST(:owner AS text) AS owner, TRUE AS leased"
