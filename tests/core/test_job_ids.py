"""Job ids keep new rows together in the indexes and keep eight hex digits telling jobs apart.

See ``rota.core.ids`` for the layout and why (random ids made enqueue, claim
and materialisation three times slower at ten million finished jobs).
"""

from __future__ import annotations

import copy
import pickle
import time
import uuid

from sqlalchemy import Engine

from rota.core.config import JobTypeSpec
from rota.core.ids import JobIds
from rota.core.queries.job_types import upsert_job_types
from rota.core.queries.jobs_insert import NewJob
from rota.producer.enqueue import JobRequest, enqueue, enqueue_many

MS = 1_000_000  # nanoseconds
T = 1_790_000_000_000 * MS  # some instant in 2026


class Clock:
    """A clock that stands still until moved."""

    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return T + self.ms * MS


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
    # A process's ids may run a few ms ahead of the clock after a burst (see JobIds).
    window = {ms % 2**24 for ms in range(before, after + 64)}
    for job_id in made:
        assert job_id.version == 8 and job_id.variant == uuid.RFC_4122
        assert stamp(job_id) in window
    assert len(set(made)) == len(made)


def test_in_a_lane_ids_sort_in_the_order_they_were_made() -> None:
    clock = Clock()
    ids = JobIds(clock)
    made = []
    for ms in range(0, 200_000, 7):
        clock.ms = ms
        made += ids.make(1 + ms % 3)
    by_lane: dict[int, list[uuid.UUID]] = {}
    for job_id in made:
        by_lane.setdefault(lane(job_id), []).append(job_id)
    for in_lane in by_lane.values():
        assert in_lane == sorted(in_lane)
        assert [i.hex for i in in_lane] == sorted(i.hex for i in in_lane)  # SQLite's text


def test_one_process_never_repeats_a_prefix_within_the_wrap() -> None:
    clock = Clock()
    ids = JobIds(clock)
    made = ids.make(10_000)  # one enqueue_many batch: 40 ms of stamps at once
    made += [ids.make(1)[0] for _ in range(2_000)]  # a scheduler tick, one by one
    clock.ms = 3  # the clock is behind the stamps given: they go on from there
    made += ids.make(300)
    for ms in range(50, 2**24, 4099):  # then single jobs over the 4.66 hours of the stamp
        clock.ms = ms
        made += ids.make(1)
    assert len({i.hex[:8] for i in made}) == len(made)  # `rota job 8digits` finds each one
    assert len(set(made)) == len(made)
    assert all(i.version == 8 and i.variant == uuid.RFC_4122 for i in made)
    # 90 bits are left to chance: no two ids share them
    assert len({i.int & ((1 << 96) - 1) for i in made}) == len(made)


def test_a_batch_takes_the_lanes_in_turn_a_millisecond_per_round() -> None:
    clock = Clock()
    made = JobIds(clock).make(1_000)
    assert len({lane(i) for i in made}) == 256
    first = (T // MS) % 2**24
    assert [stamp(i) for i in made] == [first + k // 256 for k in range(1_000)]


def test_an_id_is_an_ordinary_uuid_in_every_way_a_caller_uses_one() -> None:
    """The ids are built from their two slots, not through ``UUID.__init__``."""
    for made in JobIds().make(50):
        parsed = uuid.UUID(str(made))
        assert type(made) is uuid.UUID
        assert made == parsed and hash(made) == hash(parsed)
        assert not made != parsed  # noqa: SIM202 (__ne__ is a method of its own)
        assert made.int == parsed.int and made.bytes == parsed.bytes and made.hex == parsed.hex
        assert repr(made) == repr(parsed)
        assert made.version == 8 and made.variant == uuid.RFC_4122
        assert made.is_safe is uuid.SafeUUID.unknown
        assert pickle.loads(pickle.dumps(made)) == made
        assert copy.deepcopy(made) == made
        assert {made: 1}[parsed] == 1
