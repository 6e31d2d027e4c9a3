"""Job ids: UUIDs whose leading bits keep a job near the jobs made just before it.

A random (version 4) id sends every new row, its attempt rows and every
lookup by id to a random leaf page of the primary-key index. Once the jobs
table outgrows the database's cache (ten million finished jobs), each of
those is a disk read: enqueue, claim and scheduler materialisation run at a
third of their speed at 10 million rows. A purely time-ordered id (version 7)
avoids that, but jobs made in the same minute then share their first eight hex
digits, and operators type those eight digits (``rota job 3f2a9c1e``).

So the layout (an RFC 9562 version 8 UUID, the version for custom layouts):

=========  ======================================================
bits       meaning
=========  ======================================================
127..120   lane: taken in turn from a random one per process (see ``JobIds``)
119..96    the creation time in milliseconds, modulo 2**24 (wraps every 4.66 h)
95..0      random, except the version (8) and variant (RFC) bits
=========  ======================================================

In each lane ids grow with time, so new rows go to at most 256 insertion
points (a few MB of index pages, always cached), not anywhere. The first eight
hex digits are the lane and the millisecond: a process gives each id a slot
of its own (``JobIds``), so two jobs share them only when made by separate
processes in the same millisecond and lane, or 4.66 hours apart (the wrap)
in the same lane, about as rarely as the first eight digits of two random
ids coincide. 90 bits stay random, so ids never collide in practice.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import uuid
from collections.abc import Callable

Clock = Callable[[], int]  # nanoseconds since the epoch, as ``time.time_ns``

LANE_BITS = 8
TIME_BITS = 24
_TIME_SHIFT = 128 - LANE_BITS - TIME_BITS
_TIME_MASK = (1 << TIME_BITS) - 1
_LANE_SHIFT = 128 - LANE_BITS
_LANE_MASK = ((1 << LANE_BITS) - 1) << _LANE_SHIFT
_VERSION_BITS = 0xF << 76
_VARIANT_BITS = 0x3 << 62
# The bits left to chance: all but the lane, the time, the version and the variant.
_RANDOM = (
    ((1 << 128) - 1) & ~_LANE_MASK & ~(_TIME_MASK << _TIME_SHIFT) & ~_VERSION_BITS & ~_VARIANT_BITS
)
_FIXED = (0x8 << 76) | (0x2 << 62)  # version 8, variant 0b10 (RFC 9562)


class JobIds:
    """Makes this process's job ids: each in a (millisecond, lane) slot never used before.

    Ids take the lanes in turn from a random one, a round of 256 per
    millisecond: ids made in the same millisecond (a scheduler tick making
    2,000 occurrences, an ``enqueue_many`` batch) get different lanes, and a
    round that fills a millisecond's 256 lanes goes on into the next
    millisecond, ahead of the clock until the clock catches up (a thousand ids
    take 4 ms of stamps, far less than the time to insert them). So no two ids
    of one process share their first eight hex digits within 4.66 hours. Ids
    of separate processes made in the same millisecond share them when their
    lanes coincide (one in 256). Thread-safe.
    """

    def __init__(self, clock: Clock = time.time_ns) -> None:
        self._clock = clock
        self._ms = -1  # the millisecond of the newest slot given
        self._used = 0  # slots given in it
        self.reseed()

    def reseed(self) -> None:
        """A new first lane (and lock): a forked child is another process."""
        self._lock = threading.Lock()
        self._first_lane = int.from_bytes(os.urandom(1), "big")

    def make(self, count: int) -> list[uuid.UUID]:
        """``count`` fresh ids in consecutive slots."""
        now_ms = self._clock() // 1_000_000
        with self._lock:
            if now_ms > self._ms:
                self._ms, self._used = now_ms, 0
            ms, used = self._ms, self._used
            end = used + count
            self._ms += end >> LANE_BITS
            self._used = end & 0xFF
        pool = os.urandom(16 * count)
        first_lane = self._first_lane
        # uuid.UUID(int=...) parses its five ways of being called for every id
        # (0.9 us, a tenth of an enqueue_many job's Python); a UUID is its two
        # slots, set here as Python 3.14's UUID._from_int sets them.
        make, set_slot, UUID, unknown = object.__new__, object.__setattr__, uuid.UUID, _UNKNOWN
        ids = []
        for i, (high, low) in enumerate(_HALVES.iter_unpack(pool)):
            at = used + i
            lane = (first_lane + at) & 0xFF
            stamp = (ms + (at >> LANE_BITS)) & _TIME_MASK
            made = make(UUID)
            set_slot(
                made,
                "int",
                (((high << 64) | low) & _RANDOM)
                | (lane << _LANE_SHIFT)
                | (stamp << _TIME_SHIFT)
                | _FIXED,
            )
            set_slot(made, "is_safe", unknown)
            ids.append(made)
        return ids


_HALVES = struct.Struct(">QQ")  # 16 random bytes as two 64-bit halves
_UNKNOWN = uuid.SafeUUID.unknown


_process_ids = JobIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_process_ids.reseed)


def new_job_id() -> uuid.UUID:
    """A fresh job id (see the module docstring for its layout)."""
    return _process_ids.make(1)[0]


def new_job_ids(count: int) -> list[uuid.UUID]:
    """``count`` fresh job ids for one batch, under one lock."""
    return _process_ids.make(count)
