"""Job ids keep new rows together in the indexes and keep eight hex digits telling jobs apart.

See ``rota.shared.ids`` for the layout and why (random ids made enqueue, claim
and materialisation three times slower at ten million finished jobs).
"""

from __future__ import annotations

import time
import uuid

from sqlalchemy import Engine

from rota.shared.config.model import JobTypeSpec
from rota.shared.enqueue import JobRequest, enqueue, enqueue_many
from rota.shared.ids import Clock, new_job_id, new_job_ids
from rota.shared.queries.job_types import upsert_job_types
from rota.shared.queries.jobs_insert import NewJob

MS = 1_000_000  # nanoseconds
T = 1_790_000_000_000 * MS  # some instant in 2026


def at(ms: int) -> Clock:
    """A clock stopped ``ms`` milliseconds after ``T``."""
    return lambda: T + ms * MS


def lane(job_id: uuid.UUID) -> int:
    return job_id.int >> 120


def stamp(job_id: uuid.UUID) -> int:
    return (job_id.int >> 96) & 0xFFFFFF


def test_every_producer_makes_version_8_ids_stamped_with_their_millisecond(
    engine: Engine,
) -> None:
    with engine.begin() as conn:
        upsert_job_types(conn, [JobTypeSpec(name="report", handler="m:f")])
    before = time.time_ns() // MS
    with engine.begin() as conn:
        one = enqueue(conn, "report").job_id
        many = [e.job_id for e in enqueue_many(conn, [JobRequest("report")] * 50)]
    made = [one, *many, NewJob(job_type="t", pool="p", max_attempts=1, lease_seconds=1).job_id]
    after = time.time_ns() // MS
    window = {ms % 2**24 for ms in range(before, after + 1)}
    for job_id in made:
        assert job_id.version == 8 and job_id.variant == uuid.RFC_4122
        assert stamp(job_id) in window
    assert len(set(made)) == len(made)


def test_in_a_lane_ids_sort_in_the_order_they_were_made() -> None:
    made = [new_job_id(at(ms)) for ms in range(0, 200_000, 7)]
    by_lane: dict[int, list[uuid.UUID]] = {}
    for job_id in made:
        by_lane.setdefault(lane(job_id), []).append(job_id)
    assert len(by_lane) > 200  # new rows go to a few hundred places, not one, not anywhere
    for ids in by_lane.values():
        assert ids == sorted(ids)
        assert [i.hex for i in ids] == sorted(i.hex for i in ids)  # SQLite's text form too


def test_jobs_made_in_different_milliseconds_never_share_their_first_eight_digits() -> None:
    # within the 4.66 hours before the stamp wraps, whatever their lanes
    made = [new_job_id(at(ms)) for ms in range(0, 2**24, 4099)]
    prefixes = {job_id.hex[:8] for job_id in made}
    assert len(prefixes) == len(made)


def test_a_batch_takes_the_lanes_in_turn_and_never_repeats_a_prefix() -> None:
    ids = new_job_ids(10_000, at(0))
    assert len(set(ids)) == 10_000
    assert len({i.hex[:8] for i in ids}) == 10_000  # `rota job 8digits` finds each one
    assert len({lane(i) for i in ids}) == 256
    first = stamp(new_job_id(at(0)))
    assert {stamp(i) for i in ids} == {first + k for k in range(-(-10_000 // 256))}
    by_lane: dict[int, list[uuid.UUID]] = {}
    for job_id in ids:
        by_lane.setdefault(lane(job_id), []).append(job_id)
    assert all(ids == sorted(ids) for ids in by_lane.values())
    assert all(i.version == 8 and i.variant == uuid.RFC_4122 for i in ids)
    # 90 bits are left to chance: no two ids of a batch share them
    assert len({i.int & ((1 << 96) - 1) for i in ids}) == 10_000
