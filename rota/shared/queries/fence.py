"""The lease fence, written once: the predicate every write after a claim carries.

A worker may change a job it claimed only while the row still says it holds
the lease it was given: same job, same ``lease_generation`` (the fencing
token, raised by every claim), same owner, and a leased state (RUNNING or
CANCEL_REQUESTED). The check is inside the writing statement itself, so a
worker paused past its lease cannot write after another worker claimed the job,
and a stale thread of the same process (same owner name, older generation)
cannot either. Zero rows matched is the caller's ``LeaseLost``.

Renewals add ``lease_expires_at > now`` (a heartbeat never revives an expired
lease); outcome writes do not (a worker that finishes just after its expiry,
before anyone else claimed the job, still holds the current generation).
"""

from __future__ import annotations

from rota.shared.states import LEASED_SQL


def lease_fence(
    j: str, *, job_id: str = "b.job_id", generation: str = "b.gen", owner: str = ":owner"
) -> str:
    """The fence on table alias ``j`` against a batch row (``b``) and the ``:owner`` parameter."""
    return (
        f"{j}.job_id = {job_id}"
        f"\n          AND {j}.lease_generation = {generation}"
        f"\n          AND {j}.lease_owner = {owner}"
        f"\n          AND {j}.state IN {LEASED_SQL}"
    )
