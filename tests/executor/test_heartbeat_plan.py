"""The heartbeat passes at its held jobs' deadlines, not on a short tick.

* holding jobs whose deadlines are far, it passes about once a second (it
  passed every 50 ms, looking at every held job each time);
* an execution timeout that begins after the next pass was planned (the
  handler starts) is still kept on time;
* progress reported after the plan reaches the row within about half a second;
* a deadline already past, named again and again, does not make it spin;
* it asks which held jobs a person asked to cancel only once one of them has
  been held a second (a fleet draining short jobs asked once a second each),
  and a cancel asked right after the claim still reaches the job within a
  second;
* a stop ends it at once wherever in the loop it lands.

The windows below are what is counted in, not waits for a state.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from sqlalchemy import Engine, event

from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_control import request_cancel
from rota.executor.heartbeat import CANCEL_POLL_SECONDS, TICK_SECONDS, Heartbeat
from rota.executor.lease import PROGRESS_SECONDS, HeldJob
from rota.executor.transactions import LoopConnection
from tests.support.executor_support import (
    add_jobs,
    claim_as,
    job_row,
    job_type,
    store_types,
    wait_for,
)

OWNER = "test:1:heartbeat-plan"


def _held(engine: Engine, spec: JobTypeSpec, n: int) -> list[HeldJob]:
    store_types(engine, spec)
    add_jobs(engine, spec, n)
    claimed = claim_as(engine, OWNER, n)
    assert len(claimed) == n
    # Not started yet, as a claim leaves them: the timeout counts from ``start()``.
    return [HeldJob(c, spec, renewed_at=time.monotonic(), started_at=math.inf) for c in claimed]


@dataclass
class Watch:
    """A started heartbeat over some held jobs: when it passed, what it timed out."""

    heartbeat: Heartbeat
    passes: list[float] = field(default_factory=list)
    timed_out: list[float] = field(default_factory=list)


@pytest.fixture
def watch(engine: Engine) -> Iterator[Callable[[list[HeldJob]], Watch]]:
    """Start a heartbeat over ``helds``, each watched as ``HeldJobs.add`` does."""
    started: list[Heartbeat] = []

    def start(helds: list[HeldJob]) -> Watch:
        passes: list[float] = []
        timed_out: list[float] = []
        hb = Heartbeat(
            LoopConnection(engine),
            OWNER,
            lambda: [h for h in helds if h.stop is None],
            lambda held, why: None,
            lambda held: timed_out.append(time.monotonic()),
            on_pass=lambda: passes.append(time.monotonic()),
        )
        for h in helds:
            h.watch = hb.due_by
        started.append(hb)
        hb.start()
        return Watch(hb, passes, timed_out)

    yield start
    for hb in started:
        hb.stop()


def test_a_heartbeat_holding_jobs_passes_about_once_a_second(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch]
) -> None:
    helds = _held(engine, job_type("far"), 20)
    for h in helds:
        h.start()
    passes = watch(helds).passes
    time.sleep(2.5)  # the window the passes are counted in
    # The first pass, then the cancel poll's once a second: not 50 passes.
    assert 2 <= len(passes) <= 5, [round(p - passes[0], 3) for p in passes]


def test_a_timeout_that_begins_after_the_plan_is_kept_on_time(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch]
) -> None:
    (held,) = _held(engine, job_type("short", timeout=timedelta(seconds=0.3)), 1)
    w = watch([held])
    wait_for(lambda: w.passes, timeout=5, what="the first pass")
    # The next pass is planned a second away (the cancel poll); the handler starts now.
    held.start()
    started = held.started_at
    wait_for(lambda: w.timed_out, timeout=5, what="the timeout")
    late = w.timed_out[0] - (started + 0.3)
    assert 0 <= late < 0.35, late  # not at the planned pass, 0.7 s later


def test_progress_reported_after_the_plan_reaches_the_row_in_half_a_second(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch]
) -> None:
    (held,) = _held(engine, job_type("progress"), 1)
    held.start()
    w = watch([held])
    wait_for(lambda: w.passes, timeout=5, what="the first pass")
    held.set_progress("exporting", 1, 3)
    reported = time.monotonic()
    job_id = held.claimed.job_id
    wait_for(lambda: job_row(engine, job_id)["progress_stage"] == "exporting", what="progress")
    seen = time.monotonic()
    # Due half a second after the last renewal (the claim), then one statement.
    assert seen - reported < PROGRESS_SECONDS + 0.3, seen - reported


def test_deadlines_already_past_do_not_make_it_spin(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch]
) -> None:
    """A handler that keeps reporting progress while its renewal waits (an outage's
    retry, a timed-out job) names a deadline already past each time: passes stay
    ``TICK_SECONDS`` apart (they ran back to back, 900 a second)."""
    helds = _held(engine, job_type("past"), 1)
    w = watch(helds)
    wait_for(lambda: w.passes, timeout=5, what="the first pass")
    before = len(w.passes)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:  # the window the passes are counted in
        w.heartbeat.due_by(time.monotonic() - 10.0)
        time.sleep(0.001)
    assert len(w.passes) - before <= 1.0 / TICK_SECONDS + 2, len(w.passes) - before


@pytest.fixture
def cancel_polls(engine: Engine) -> Iterator[list[float]]:
    """When the heartbeat asked the database for its jobs' cancel requests (monotonic)."""
    polls: list[float] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if "state = 'CANCEL_REQUESTED' AND lease_owner" in statement:
            polls.append(time.monotonic())

    event.listen(engine, "before_cursor_execute", seen)
    yield polls
    event.remove(engine, "before_cursor_execute", seen)


def test_jobs_held_less_than_a_second_are_not_polled_for_cancellation(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch], cancel_polls: list[float]
) -> None:
    helds = _held(engine, job_type("short-held"), 20)
    claimed_at = min(h.renewed_at for h in helds)
    for h in helds:
        h.start()
    w = watch(helds)
    wait_for(lambda: w.passes, timeout=5, what="the first pass")
    time.sleep(max(0.0, claimed_at + 0.8 - time.monotonic()))  # the window counted in
    assert cancel_polls == [], [round(p - claimed_at, 3) for p in cancel_polls]
    # Held a second now: asked from then on, once a second.
    wait_for(lambda: cancel_polls, timeout=5, what="the first cancel poll")
    assert CANCEL_POLL_SECONDS <= cancel_polls[0] - claimed_at < CANCEL_POLL_SECONDS + 0.3


def test_a_job_held_between_passes_is_polled_a_second_after_its_claim(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch], cancel_polls: list[float]
) -> None:
    """The pass after the claim plans the poll: the idle tick's next pass, a
    second after the last, would come 0.6 s after it is due."""
    helds: list[HeldJob] = []
    w = watch(helds)
    wait_for(lambda: w.passes, timeout=5, what="the first pass")
    time.sleep(max(0.0, w.passes[0] + 0.4 - time.monotonic()))
    (held,) = _held(engine, job_type("held-between-passes"), 1)
    held.start()
    held.watch = w.heartbeat.due_by
    helds.append(held)  # as ``HeldJobs.add`` does: its renewal is far, so no wake-up
    wait_for(lambda: cancel_polls, timeout=5, what="the first cancel poll")
    late = cancel_polls[0] - (held.held_since + CANCEL_POLL_SECONDS)
    assert 0 <= late < 0.3, late


def test_a_cancel_asked_right_after_the_claim_reaches_the_job_within_a_second(
    engine: Engine, watch: Callable[[list[HeldJob]], Watch], cancel_polls: list[float]
) -> None:
    (held,) = _held(engine, job_type("cancelled-early"), 1)
    held.start()
    watch([held])
    with engine.begin() as conn:
        request_cancel(conn, held.claimed.job_id)
    asked = time.monotonic()
    wait_for(lambda: held.cancel_requested, timeout=5, what="the cancel request")
    assert time.monotonic() - asked < CANCEL_POLL_SECONDS + 0.3
    assert len(cancel_polls) == 1  # the one poll found it: none more for a job told


class _StopAtAcquire:
    """A plan lock that signals the heartbeat's stop as its own thread takes the lock
    for the ``n``-th time: the stop lands at that point of the loop."""

    def __init__(self, n: int) -> None:
        self._lock = threading.Lock()
        self._n = n
        self.heartbeat: Heartbeat | None = None
        self.stopped_at: float | None = None

    def __enter__(self) -> bool:
        if threading.current_thread().name == "rota-heartbeat" and self.heartbeat is not None:
            self._n -= 1
            if self._n == 0:
                self.heartbeat.signal_stop()
                self.stopped_at = time.monotonic()
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


@pytest.mark.parametrize("n", range(1, 7))
def test_a_stop_anywhere_in_the_loop_ends_it_at_once(engine: Engine, n: int) -> None:
    """Wherever ``signal_stop`` lands, the thread ends within a pass, not after the
    planned wait (a second): it once cleared the stop's wake-up right after looking."""
    hb = Heartbeat(LoopConnection(engine), OWNER, list, lambda held, why: None, lambda held: None)
    lock = _StopAtAcquire(n)
    hb._plan_lock = lock  # type: ignore[assignment]
    lock.heartbeat = hb
    hb.start()
    try:
        wait_for(lambda: lock.stopped_at is not None, timeout=5, what="the stop")
        assert hb.join(0.5), "the heartbeat still runs half a second after its stop"
    finally:
        hb.stop()
