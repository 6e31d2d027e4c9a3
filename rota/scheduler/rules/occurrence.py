"""What a rule produces (``Occurrence``), what a rule is (``Rule``), and its error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


class RuleError(ValueError):
    """A rule that cannot be compiled: bad cron or RRULE text, unknown zone, bad interval.

    ``field`` names the schedule field at fault when it is not the rule itself
    (``timezone``, ``anchor``, ...), so the loader can point at the right line.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Occurrence:
    """One firing of a rule.

    ``instant`` is the nominal fire instant (aware, UTC, before jitter): the instant
    in the occurrence key. ``local`` is the same instant in the schedule's zone, so
    always ``local == instant.astimezone(zone)``. ``note`` says how DST changed this
    occurrence ("shifted from 02:30 by the DST gap", "first of the repeated 02:30",
    ...), ``None`` when nothing special happened.

    ``skipped`` is true for a wall time dropped by an explicit ``nonexistent: skip``:
    it is reported (at the gap's transition instant) so the scheduler can count it
    as skipped with reason 'dst'; it never becomes a job.
    """

    instant: datetime
    local: datetime
    note: str | None
    skipped: bool = False


class Rule(Protocol):
    """A compiled schedule rule: a pure function of the previous instant."""

    def next_after(self, after: datetime) -> Occurrence | None:
        """The first occurrence strictly later than ``after`` (an aware instant).

        ``None`` when the rule is exhausted (RRULE COUNT/UNTIL, or nothing within
        the search horizon). Successive calls fed with the previous result's
        instant yield strictly increasing instants, each instant at most once.
        """
        ...
