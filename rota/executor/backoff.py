"""Retry delays: capped exponential backoff, jitter added on top."""

from __future__ import annotations

import random

from rota.core.config import Backoff


def retry_delay_seconds(backoff: Backoff, attempts_made: int, rng: random.Random) -> float:
    """min(max, base * 2^(n-1)) plus up to ``jitter`` of it, n = attempts made so far (n >= 1).

    Never below the capped exponential, so a retry never hits a rate-limited
    dependency sooner than the schedule says; the jitter on top spreads the
    retries of many jobs that failed together (after an outage) over a window
    instead of one instant.
    """
    capped = backoff.delay_before_jitter(attempts_made).total_seconds()
    return capped + rng.uniform(0.0, backoff.jitter * capped)
