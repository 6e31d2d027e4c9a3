"""Retry delays: capped exponential backoff with full jitter."""

from __future__ import annotations

import random

from rota.shared.config.model import Backoff


def retry_delay_seconds(backoff: Backoff, attempts_made: int, rng: random.Random) -> float:
    """Uniform in [0, min(max, base * 2^(n-1))], n = attempts made so far (n >= 1).

    Full jitter: after an outage, failed jobs spread over the whole window instead
    of retrying in the same second.
    """
    capped = backoff.delay_before_jitter(attempts_made).total_seconds()
    return rng.uniform(0.0, capped)
