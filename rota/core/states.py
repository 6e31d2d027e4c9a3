r"""Job states and the transitions between them.

::

                    claim (gen+1, attempt+1)
    QUEUED ───────────────┐
                          v
    RETRY_WAIT ──────> RUNNING ───────────────> SUCCEEDED
        ^                 │  │ \─ error, attempts left ──> RETRY_WAIT
        │                 │  │ \─ error, none left / permanent ──> FAILED
        │                 │  └─ graceful release (attempt refunded) ──> QUEUED
        │                 v
        │        CANCEL_REQUESTED ── worker acknowledges ──> CANCELLED
        │                 └──────── lease expires (sweeper) ─> CANCELLED
        └── lease expires (sweeper), attempts left

    QUEUED / RETRY_WAIT ── cancel ──> CANCELLED
    FAILED ── replay (fresh attempt budget) ──> QUEUED

Invariants the database enforces with CHECK constraints:

* ``state`` is one of the seven names below;
* a lease (owner and expiry) exists exactly while RUNNING or CANCEL_REQUESTED;
* ``attempt_count`` never exceeds ``max_attempts``.

Every transition out of RUNNING or CANCEL_REQUESTED is written with the
worker's ``lease_generation`` in the WHERE clause; a write that matches no row
means the lease was lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    RETRY_WAIT = "RETRY_WAIT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    CANCELLED = "CANCELLED"


ALL_STATES: tuple[str, ...] = tuple(s.value for s in JobState)
CLAIMABLE: tuple[str, ...] = (JobState.QUEUED.value, JobState.RETRY_WAIT.value)
LEASED: tuple[str, ...] = (JobState.RUNNING.value, JobState.CANCEL_REQUESTED.value)
TERMINAL: tuple[str, ...] = (
    JobState.SUCCEEDED.value,
    JobState.FAILED.value,
    JobState.CANCELLED.value,
)
UNFINISHED: tuple[str, ...] = CLAIMABLE + LEASED


def sql_in(values: Iterable[str]) -> str:
    """A parenthesised SQL list of these names, for ``state IN ...`` in statements and CHECKs.

    Every state set in SQL is built here from the enums, never typed out again.
    """
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


CLAIMABLE_SQL = sql_in(CLAIMABLE)
LEASED_SQL = sql_in(LEASED)
TERMINAL_SQL = sql_in(TERMINAL)
UNFINISHED_SQL = sql_in(UNFINISHED)


class AttemptOutcome(StrEnum):
    """What one claim of a job ended as, recorded on its ``job_attempts`` row."""

    SUCCEEDED = "SUCCEEDED"
    RETRY = "RETRY"  # failed, another attempt is scheduled
    FAILED = "FAILED"  # failed, no attempt left or a permanent error
    AMBIGUOUS = "AMBIGUOUS"  # outcome unknown, reconcile before a rerun
    CANCELLED = "CANCELLED"  # the worker acknowledged a cancel request
    RELEASED = "RELEASED"  # graceful shutdown handed the job back, attempt refunded
    LEASE_EXPIRED = "LEASE_EXPIRED"  # the sweeper found the lease expired
    LEASE_LOST = "LEASE_LOST"  # the worker learned its lease had moved on
    RECONCILED = "RECONCILED"  # the reconcile hook found the work already done


class SkipReason(StrEnum):
    """Why an occurrence got no job of its own (the ``schedule_skips`` ledger)."""

    MISFIRE = "misfire"  # late beyond grace (skip, or older than catch_up_window)
    DST = "dst"  # a wall time in a DST gap, under ``nonexistent: skip``
    OVERLAP = "overlap"  # ``overlap: forbid`` while an earlier run was unfinished
    PAUSED = "paused"  # fell in a pause, dropped by the misfire policy on resume
    COALESCED = "coalesced"  # folded into the job of a newer occurrence


class LateReason(StrEnum):
    """Why an occurrence of a schedule with a ``deadline`` is late (``late_occurrences``).

    Judged as of the deadline instant (scheduled instant + deadline), so every
    replica reaches the same reason whenever it looks. An occurrence whose
    skip ledger reason is ``paused`` is ``paused`` (it never existed because of
    the pause); the other ledger reasons become ``skipped:<reason>``.
    """

    NOT_FINISHED = "not_finished"  # no success by the deadline: queued, running, retrying
    FAILED = "failed"  # FAILED by the deadline
    CANCELLED = "cancelled"  # CANCELLED by the deadline
    PAUSED = "paused"  # never created: the schedule was paused
    SET_ASIDE = "set_aside"  # never created: the scheduler set the schedule aside
    SKIPPED_MISFIRE = "skipped:misfire"
    SKIPPED_DST = "skipped:dst"
    SKIPPED_OVERLAP = "skipped:overlap"
    SKIPPED_COALESCED = "skipped:coalesced"  # folded into a job that was never made

    @classmethod
    def skipped(cls, reason: SkipReason) -> LateReason:
        """The late reason of an occurrence the skip ledger accounts for."""
        if reason is SkipReason.PAUSED:
            return cls.PAUSED
        return cls(f"skipped:{reason.value}")


class WorkerKind(StrEnum):
    """What a process in the ``workers`` registry is (``rota workers``)."""

    EXECUTOR = "executor"
    SCHEDULER = "scheduler"
