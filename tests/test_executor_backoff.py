"""Retry delays: min(max, base * 2^(n-1)) before jitter, full jitter within [0, capped]."""

from __future__ import annotations

import random
from datetime import timedelta

from rota.executor.backoff import retry_delay_seconds
from rota.shared.config.model import Backoff

BACKOFF = Backoff(base=timedelta(seconds=5), max=timedelta(minutes=15))


def test_delays_before_jitter() -> None:
    got = [BACKOFF.delay_before_jitter(n).total_seconds() for n in range(1, 11)]
    assert got == [5, 10, 20, 40, 80, 160, 320, 640, 900, 900]
    assert BACKOFF.delay_before_jitter(10_000).total_seconds() == 900


def test_full_jitter_stays_within_zero_and_the_capped_delay() -> None:
    rng = random.Random(7)
    for n in range(1, 12):
        capped = BACKOFF.delay_before_jitter(n).total_seconds()
        samples = [retry_delay_seconds(BACKOFF, n, rng) for _ in range(500)]
        assert all(0.0 <= s <= capped for s in samples)
        # Full jitter spreads over the whole window, not just near the top.
        assert min(samples) < 0.1 * capped and max(samples) > 0.9 * capped
