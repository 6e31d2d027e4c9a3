"""Retry delays: never below min(max, base * 2^(n-1)); jitter is added on top of it."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from rota.core.config import DEFAULT_BACKOFF_JITTER, Backoff, JobTypeSpec
from rota.executor.backoff import retry_delay_seconds

BACKOFF = Backoff(base=timedelta(seconds=5), max=timedelta(minutes=15))


def test_delays_before_jitter() -> None:
    got = [BACKOFF.delay_before_jitter(n).total_seconds() for n in range(1, 11)]
    assert got == [5, 10, 20, 40, 80, 160, 320, 640, 900, 900]
    assert BACKOFF.delay_before_jitter(10_000).total_seconds() == 900


def test_the_delay_is_never_below_the_capped_exponential() -> None:
    """Default jitter: up to 20 % on top, spread over that whole range."""
    assert DEFAULT_BACKOFF_JITTER == 0.2 and BACKOFF.jitter == 0.2
    rng = random.Random(7)
    for n in range(1, 12):
        capped = BACKOFF.delay_before_jitter(n).total_seconds()
        samples = [retry_delay_seconds(BACKOFF, n, rng) for _ in range(500)]
        assert all(capped <= s <= capped * 1.2 for s in samples)
        assert min(samples) < capped * 1.02 and max(samples) > capped * 1.18


@pytest.mark.parametrize("jitter", [0.0, 0.5, 1.0])
def test_the_jitter_fraction_is_configurable(jitter: float) -> None:
    backoff = Backoff(base=timedelta(seconds=2), max=timedelta(seconds=60), jitter=jitter)
    rng = random.Random(3)
    samples = [retry_delay_seconds(backoff, 3, rng) for _ in range(300)]
    assert all(8.0 <= s <= 8.0 * (1 + jitter) for s in samples)
    if jitter == 0.0:
        assert set(samples) == {8.0}


def test_stored_job_types_keep_their_jitter_and_older_ones_get_the_default() -> None:
    spec = JobTypeSpec(name="t", handler="m:f", backoff=Backoff(jitter=0.5))
    assert spec.to_json()["backoff"] == {"base": "5s", "max": "15m", "jitter": 0.5}
    assert JobTypeSpec.from_json(spec.to_json()) == spec
    stored_before = {"name": "t", "handler": "m:f", "backoff": {"base": "5s", "max": "15m"}}
    assert JobTypeSpec.from_json(stored_before).backoff.jitter == DEFAULT_BACKOFF_JITTER
