"""Deterministic jitter: the same occurrence gets the same delay on every replica.

The offset is a hash of the occurrence key (schedule name and nominal instant)
mapped onto ``[0, jitter)``. Only ``run_after`` moves; the key and
``scheduled_for`` stay the nominal instant.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from rota.core.timefmt import occurrence_key

_SCALE = 2**64


def jitter_offset(schedule_name: str, instant: datetime, jitter: timedelta) -> timedelta:
    """A delay in ``[0, jitter)``, to the millisecond, derived from the occurrence key."""
    total_ms = int(jitter.total_seconds() * 1000)
    if total_ms <= 0:
        return timedelta(0)
    digest = hashlib.sha256(occurrence_key(schedule_name, instant).encode()).digest()
    fraction = int.from_bytes(digest[:8], "big")
    return timedelta(milliseconds=fraction * total_ms // _SCALE)


def run_after(schedule_name: str, instant: datetime, jitter: timedelta) -> datetime:
    return instant + jitter_offset(schedule_name, instant, jitter)
