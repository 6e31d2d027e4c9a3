"""The replica loop: it sleeps until due, wakes on NOTIFY, and stops when asked."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from rota.core.config import MisfirePolicy
from rota.scheduler.service import SchedulerService
from tests.support.scheduler_helpers import apply_specs, jobs_of, spec


def _wait_for_jobs(engine: Engine, name: str, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if jobs_of(engine, name):
            return len(jobs_of(engine, name))
        time.sleep(0.05)
    return 0


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_apply_wakes_a_sleeping_replica_at_once(engine: Engine) -> None:
    service = SchedulerService(engine, max_sleep=60.0)  # without a NOTIFY: a minute asleep
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,))
    thread.start()
    try:
        time.sleep(0.5)  # asleep, nothing scheduled
        apply_specs(engine, spec("soon", every=timedelta(seconds=1)), now=None)
        assert _wait_for_jobs(engine, "soon", 10) >= 1
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive(), "the replica did not stop"


def test_the_loop_makes_jobs_on_time_and_stops_promptly(engine: Engine) -> None:
    apply_specs(
        engine, spec("tick", every=timedelta(seconds=1), misfire=MisfirePolicy.CATCH_UP), now=None
    )
    service = SchedulerService(engine, max_sleep=0.5)
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while len(jobs_of(engine, "tick")) < 3:
            assert time.monotonic() < deadline, "no jobs from the running loop"
            time.sleep(0.05)
    finally:
        stop.set()
        started = time.monotonic()
        thread.join(timeout=5)
    assert not thread.is_alive() and time.monotonic() - started < 2
    instants = [j["scheduled_for"] for j in jobs_of(engine, "tick")]
    assert instants == sorted(set(instants))
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(instants))
