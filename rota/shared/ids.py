"""Job ids: UUIDs whose leading bits keep a job near the jobs made just before it.

A random (version 4) id sends every new row, its attempt rows and every
lookup by id to a random leaf page of the primary-key index. Once the jobs
table outgrows the database's cache (ten million finished jobs), each of
those is a disk read: enqueue, claim and scheduler materialisation slowed to
a third at 10 million rows. A purely time-ordered id (version 7) fixes that,
but jobs made in the same minute then share their first eight hex digits,
and operators type those eight digits (``rota job 3f2a9c1e``).

So the layout (an RFC 9562 version 8 UUID, the version for custom layouts):

=========  ======================================================
bits       meaning
=========  ======================================================
127..120   lane: random, 256 lanes
119..96    the creation time in milliseconds, modulo 2**24 (wraps every 4.66 h)
95..0      random, except the version (8) and variant (RFC) bits
=========  ======================================================

In each lane ids grow with time, so new rows go to 256 insertion points
(a few MB of index pages, always cached) instead of anywhere. The first eight
hex digits are the lane and the millisecond: two jobs share them only when
made in the same millisecond and lane (about one in 60 at 4,000 jobs/s by
single enqueues; never within one batch, see ``new_job_ids``), or when a
wrap 4.66 hours apart and the lane coincide, about as rarely as the first
eight digits of two random ids coincide. 90 bits stay random, so ids made by
separate processes never collide in practice.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

Clock = Callable[[], int]  # nanoseconds since the epoch, as ``time.time_ns``

LANE_BITS = 8
TIME_BITS = 24
_TIME_SHIFT = 128 - LANE_BITS - TIME_BITS
_TIME_MASK = (1 << TIME_BITS) - 1
_VERSION_BITS = 0xF << 76
_VARIANT_BITS = 0x3 << 62
# The bits left to chance: all but the time, the version and the variant.
_RANDOM = ((1 << 128) - 1) & ~(_TIME_MASK << _TIME_SHIFT) & ~_VERSION_BITS & ~_VARIANT_BITS
_FIXED = (0x8 << 76) | (0x2 << 62)  # version 8, variant 0b10 (RFC 9562)
_LANE_SHIFT = 128 - LANE_BITS
_LANE_MASK = ((1 << LANE_BITS) - 1) << _LANE_SHIFT


def new_job_id(clock: Clock = time.time_ns) -> uuid.UUID:
    """A fresh job id (see the module docstring for its layout)."""
    now_ms = clock() // 1_000_000
    chance = int.from_bytes(os.urandom(16), "big")
    return uuid.UUID(int=(chance & _RANDOM) | ((now_ms & _TIME_MASK) << _TIME_SHIFT) | _FIXED)


def new_job_ids(count: int, clock: Clock = time.time_ns) -> list[uuid.UUID]:
    """``count`` fresh job ids for one batch (producers' ``enqueue_many``).

    The batch takes the lanes in turn from a random one, and a millisecond
    per round of 256: no two ids of a batch share their first eight hex digits,
    and a thousand ids take 4 ms of the stamp, far less than the time to
    insert them, so the next batch does not reuse those stamps either.
    """
    now_ms = clock() // 1_000_000
    pool = os.urandom(16 * count + 1)
    first_lane = pool[-1]
    from_bytes = int.from_bytes
    make = uuid.UUID
    ids = []
    for i in range(count):
        lane = (first_lane + i) & 0xFF
        stamp = (now_ms + (i >> LANE_BITS)) & _TIME_MASK
        chance = from_bytes(pool[16 * i : 16 * i + 16], "big") & _RANDOM & ~_LANE_MASK
        ids.append(make(int=chance | (lane << _LANE_SHIFT) | (stamp << _TIME_SHIFT) | _FIXED))
    return ids
