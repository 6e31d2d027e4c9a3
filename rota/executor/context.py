"""``ctx``: what a handler gets to know about its job and to tell the executor."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.core.storable import BIGINT_MAX, PROGRESS_STAGE_MAX, storable_text
from rota.executor.errors import (
    JobCancelled,
    JobReleased,
    JobTimedOut,
    LeaseLost,
    PermanentError,
)
from rota.executor.lease import HeldJob, StopReason
from rota.executor.output import JobLog

BAD_ARGS = "BAD_ARGS"
_JOB_LOG = JobLog()  # holds nothing of a job: the attempt's output is the context's


@dataclass(frozen=True)
class Covers:
    """The occurrences a coalesced scheduled job stands for: first, last, how many."""

    first: datetime
    last: datetime
    count: int


@dataclass(frozen=True)
class JobContext:
    job_id: uuid.UUID
    job_type: str
    attempt: int  # 1 for the first attempt
    payload_ref: str | None
    args: dict[str, Any]
    scheduled_for: datetime | None
    covers: Covers | None
    _held: HeldJob

    @classmethod
    def for_job(cls, held: HeldJob) -> JobContext:
        """The context of a claimed job; PermanentError(BAD_ARGS) if its args are not an object."""
        c = held.claimed
        if not isinstance(c.args, dict):  # written by hand, or before enqueue checked args
            raise PermanentError(
                BAD_ARGS,
                f"the job's args are a {type(c.args).__name__}, not a JSON object: "
                f"{storable_text(repr(c.args), 500)}",
            )
        covers = None
        if c.covers_count is not None and c.scheduled_for is not None:
            covers = Covers(c.covers_from or c.scheduled_for, c.scheduled_for, c.covers_count)
        return cls(
            job_id=c.job_id,
            job_type=c.job_type,
            attempt=c.attempt,
            payload_ref=c.payload_ref,
            args=dict(c.args),
            scheduled_for=c.scheduled_for,
            covers=covers,
            _held=held,
        )

    @property
    def log(self) -> JobLog:
        """A logger (``rota.handler``) for the handler's words.

        Its records from INFO up are kept in this attempt's output (``rota job
        ID --output``) whatever the executor's log level, and go to the
        executor's log as any record does. Records of the handler's own
        loggers are kept too, at the executor's log level.
        """
        return _JOB_LOG

    def idempotency_key(self, op: str) -> str:
        """A key for operation ``op`` of this job, the same in every attempt."""
        return f"rota:{self.job_id}:{op}"

    def progress(
        self, stage: str | None = None, done: int | None = None, total: int | None = None
    ) -> None:
        """Record progress; stored on the job row with the next (fenced) heartbeat.

        ``stage`` is text, cut to 200 characters (with a marker) and made
        storable; ``done`` and ``total`` are whole numbers from 0 to 2^63-1.
        A wrong type raises TypeError, a number out of range ValueError, and
        nothing is recorded. None leaves a field as it was.
        """
        if stage is not None:
            if not isinstance(stage, str):
                raise TypeError(
                    f"ctx.progress(stage=...) takes a string, got {type(stage).__name__}"
                )
            stage = storable_text(stage, PROGRESS_STAGE_MAX)
        self._held.set_progress(stage, _count("done", done), _count("total", total))

    @property
    def cancel_requested(self) -> bool:
        return self._held.cancel_requested

    def checkpoint(self) -> None:
        """Raise if this handler must stop: lease lost, timed out, released, or cancelled."""
        held = self._held
        stop = held.stop
        if stop is StopReason.LOST or (stop is None and held.locally_expired()):
            raise LeaseLost(f"job {self.job_id}: this worker no longer holds the lease")
        if stop is StopReason.TIMED_OUT:
            raise JobTimedOut(f"job {self.job_id}: the attempt overran its timeout")
        if stop is StopReason.RELEASED:
            raise JobReleased(f"job {self.job_id}: the executor is shutting down")
        if held.cancel_requested:
            raise JobCancelled(f"job {self.job_id}: cancellation was requested")


def _count(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"ctx.progress({name}=...) takes a whole number, got {type(value).__name__}"
        )
    if not 0 <= value <= BIGINT_MAX:
        raise ValueError(f"ctx.progress({name}=...) must be from 0 to {BIGINT_MAX}, got {value}")
    return int(value)
