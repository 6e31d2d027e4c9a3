"""What a worker knows about one job it holds: the lease, the stop signals, progress.

A ``HeldJob`` is shared by the handler's thread (through ``ctx``), the heartbeat
thread and the outcome writer; a lock guards the few fields more than one of
them writes. ``settle()`` is the single decision point for reporting: the
first of {the handler's outcome, the timeout, the release at shutdown, the
discovery that the lease is gone} to settle the job decides what (if anything)
is written; every later one is dropped.
"""

from __future__ import annotations

import math
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from rota.core.claimed import ClaimedJob, Renewal
from rota.core.config import JobTypeSpec
from rota.executor.output import OutputTail
from rota.executor.processes import kill_process_group

# A lease is treated as lost locally once this share of it has passed since the
# last renewal the database confirmed: the margin covers a slow statement and
# clock-rate differences, so a worker that cannot renew stops its handlers
# before the lease can pass to another worker.
LOCAL_LEASE_SHARE = 0.8
RENEW_SHARE = 1 / 3  # renew after a third of the lease: one lost beat is tolerated
PROGRESS_SECONDS = 0.5  # progress reaches the row at most this late after the last renewal


class StopReason(StrEnum):
    LOST = "lost"
    TIMED_OUT = "timed_out"
    RELEASED = "released"


@dataclass(eq=False)
class HeldJob:
    claimed: ClaimedJob
    spec: JobTypeSpec | None
    renewed_at: float  # monotonic time the last confirmed renewal (or the claim) was sent
    started_at: float = field(default_factory=time.monotonic)
    cancel_requested: bool = False
    stop: StopReason | None = None
    proc: subprocess.Popen[bytes] | None = None
    load_error: str | None = None  # why ``spec`` could not be loaded (None: it is not stored)
    output: OutputTail | None = None  # what its handler writes, from when a slot runs it
    # The heartbeat's ``due_by``, set when the job enters the held set: told of a
    # deadline that comes into being later (the start, progress), so the heartbeat
    # sleeps until the nearest one instead of looking at every job on a short tick.
    watch: Callable[[float], None] | None = None
    _settled: bool = False
    _progress: tuple[str | None, int | None, int | None] | None = None
    _output_sent: int = 0  # the output's ``written`` when a renewal last took its tail
    _output_sent_at: float = -math.inf  # the monotonic time it did
    _lock: threading.Lock = field(default_factory=threading.Lock)
    held_since: float = field(init=False)  # monotonic time of the claim: renewals leave it

    def __post_init__(self) -> None:
        self.held_since = self.renewed_at

    @property
    def local_deadline(self) -> float:
        return self.renewed_at + self.claimed.lease_seconds * LOCAL_LEASE_SHARE

    @property
    def settled(self) -> bool:
        return self._settled

    def settle(self) -> bool:
        """Claim the right to report this job's outcome; False if someone already did."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True

    def interrupt(self, reason: StopReason) -> None:
        """Make ``ctx.checkpoint()`` raise from now on; kill a subprocess handler."""
        with self._lock:
            if self.stop is None:
                self.stop = reason
        self.kill_process()

    def kill_process(self) -> None:
        proc = self.proc
        if proc is not None:
            kill_process_group(proc)

    def start(self) -> None:
        """A slot starts the handler now: the execution timeout counts from here."""
        self.started_at = time.monotonic()
        spec, watch = self.spec, self.watch
        if watch is not None and spec is not None and spec.timeout is not None:
            watch(self.started_at + spec.timeout.total_seconds())

    def renewal_due(self) -> float:
        """The monotonic time its lease is due for renewal: a share of the lease after
        the last renewal, or sooner while progress waits to be sent."""
        due = self.renewed_at + self.claimed.lease_seconds * RENEW_SHARE
        if self._progress is not None:
            due = min(due, self.renewed_at + PROGRESS_SECONDS)
        return due

    def timeout_at(self) -> float:
        """The monotonic time its execution timeout passes (never, before its start)."""
        spec = self.spec
        if spec is None or spec.timeout is None or self._settled:
            return math.inf
        return self.started_at + spec.timeout.total_seconds()

    def locally_expired(self, now_mono: float | None = None) -> bool:
        return (time.monotonic() if now_mono is None else now_mono) > self.local_deadline

    def set_progress(self, stage: str | None, done: int | None, total: int | None) -> None:
        with self._lock:
            first = self._progress is None
            old = self._progress or (None, None, None)
            self._progress = (
                stage if stage is not None else old[0],
                done if done is not None else old[1],
                total if total is not None else old[2],
            )
        watch = self.watch
        if first and watch is not None:  # later reports ride on the same renewal
            watch(self.renewed_at + PROGRESS_SECONDS)

    @property
    def has_progress(self) -> bool:
        return self._progress is not None

    def take_progress(self) -> tuple[str | None, int | None, int | None] | None:
        """The progress not yet sent, now the outcome's to write; None if there is none."""
        with self._lock:
            progress, self._progress = self._progress, None
        return progress

    def renewal(self, mono: float) -> Renewal:
        """The renewal to send at monotonic time ``mono``, taking any pending progress
        with it, and the tail of the output when the handler wrote more since the last
        renewal took it, at most once a renewal interval (a third of the lease):
        progress makes renewals come every ``PROGRESS_SECONDS``, and a tail is up to
        64 KiB a job. An operator sees a running attempt's output at most a renewal
        interval late.

        Once the job is settled its pending progress stays for the outcome
        (``take_progress``), and the outcome carries the output: a renewal sent
        after the outcome is written matches no row, and would lose them.
        """
        with self._lock:
            if self._settled:
                progress = None
            else:
                progress, self._progress = self._progress, None
            tail = self.output
            written = 0 if tail is None or self._settled else tail.written
            interval = self.claimed.lease_seconds * RENEW_SHARE
            fresh = written > self._output_sent and mono >= self._output_sent_at + interval
            if fresh:
                self._output_sent, self._output_sent_at = written, mono
        stage, done, total = progress or (None, None, None)
        c = self.claimed
        kept = tail.snapshot() if fresh and tail is not None else None
        if kept is None:
            return Renewal(c.job_id, c.lease_generation, stage, done, total)
        return Renewal(
            c.job_id, c.lease_generation, stage, done, total, kept.text, kept.dropped_bytes
        )

    def restore_progress(self, renewal: Renewal) -> None:
        """Put back progress (and output) a failed heartbeat did not store."""
        with self._lock:
            if renewal.output is not None:  # the next renewal sends the tail again
                self._output_sent, self._output_sent_at = 0, -math.inf
            if renewal.stage is None and renewal.done is None and renewal.total is None:
                return
            if self._progress is None:
                self._progress = (renewal.stage, renewal.done, renewal.total)
