"""Operator actions and the note each one carries: who, why (the time is the database's).

Every operator action (cancel, replay, pause, resume, trigger, prune,
backfill) is recorded in the ``operator_actions`` table, in the transaction
of the change itself, with the actor (``user@host`` for the command line, or
its ``--actor``; the token's name over HTTP), an optional free-text reason,
and the database clock. ``rota audit``, ``GET /audit``, ``rota job`` and the
job's and schedule's resources list them.

Each row has one target (``TargetKind``): a job (cancel, replay: one row
per job, a bulk action too), a schedule (pause, resume, trigger, backfill),
or a set of jobs described in words (prune: one row for the whole run, never
one per deleted job).

Both strings come from outside (a command line, an HTTP body) and are
hostile until checked: ``ActionNote.of`` refuses what cannot be stored or
shown safely (too long, NUL, control characters that would rewrite a
terminal line, lone surrogates from undecodable bytes) with a ``ValueError``
that names the field.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import StrEnum

REASON_MAX_CHARS = 1000
ACTOR_MAX_CHARS = 200


class OperatorAction(StrEnum):
    CANCEL = "cancel"
    REPLAY = "replay"
    PAUSE = "pause"
    RESUME = "resume"
    TRIGGER = "trigger"
    PRUNE = "prune"
    BACKFILL = "backfill"


class TargetKind(StrEnum):
    """What an action was taken on; a row holds exactly one (a CHECK says so)."""

    JOB = "job"  # job_id
    SCHEDULE = "schedule"  # schedule_name
    JOBS = "jobs"  # job_filter: the jobs a prune chose, in words


def target_of(
    job_id: object | None, schedule_name: str | None, job_filter: str | None
) -> tuple[TargetKind, str]:
    """The kind and the text of a row's target, from its three target columns."""
    if job_id is not None:
        return TargetKind.JOB, str(job_id)
    if schedule_name is not None:
        return TargetKind.SCHEDULE, schedule_name
    return TargetKind.JOBS, job_filter or ""


def check_note_text(field: str, value: str, max_chars: int) -> str:
    """``value`` if it can be stored and printed as it is; else a ValueError saying why."""
    if len(value) > max_chars:
        raise ValueError(f"{field} is at most {max_chars} characters, got {len(value)}")
    for position, char in enumerate(value, start=1):
        if char == "\x00":
            raise ValueError(
                f"{field} holds a NUL character (at {position}), which cannot be stored"
            )
        if "\ud800" <= char <= "\udfff":
            raise ValueError(
                f"{field} is not valid text at character {position} (bytes that are not UTF-8)"
            )
        if unicodedata.category(char) == "Cc":
            raise ValueError(
                f"{field} holds a control character (U+{ord(char):04X} at {position}); "
                "write it on one line, without escape sequences"
            )
    return value


@dataclass(frozen=True)
class ActionNote:
    """Who asked for an action, and why (``reason`` may be None)."""

    actor: str
    reason: str | None = None

    @classmethod
    def of(cls, actor: str, reason: str | None = None) -> ActionNote:
        """A checked note: an empty reason means none; a bad value raises ValueError."""
        actor = check_note_text("the actor", actor.strip(), ACTOR_MAX_CHARS)
        if not actor:
            raise ValueError("the actor must not be empty")
        if reason is not None:
            reason = check_note_text("the reason", reason.strip(), REASON_MAX_CHARS) or None
        return cls(actor, reason)
