"""What to do with the occurrences that are due: a pure decision, no database.

``plan_due`` takes a rule, the schedule's policies, the first unhandled
occurrence, the clock and a job budget, and returns a ``Plan``: the jobs to
make, the ranges to record as skipped or coalesced, the new cursor (the newest
instant handled) and the next occurrence. The tick turns the plan into rows.

Ranges are counted by ``scan``: one occurrence at a time for calendar rules,
by arithmetic for a fixed interval (``every:``), so a long outage is one
ledger row and bounded work. No policy walks more than ``WALK_LIMIT``
occurrences in one transaction: ``catch_up`` and ``skip`` record a longer
range in several ledger rows; ``coalesce`` carries what it counted so far
(``Coalescing``, stored on the schedule row) to the next transaction, and the
one that reaches now makes the single job covering the whole range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from rota.core.config import MisfirePolicy, ScheduleSpec
from rota.core.states import SkipReason

_TINY = timedelta(microseconds=1)
# At most this many occurrences are walked one by one to skip them in one
# transaction (a calendar rule costs up to ~150 us each); a longer range is
# recorded in several ledger rows, over several transactions.
WALK_LIMIT = 20_000


class OccurrenceLike(Protocol):
    @property
    def instant(self) -> datetime: ...

    @property
    def skipped(self) -> bool: ...


class RuleLike(Protocol):
    def next_after(self, after: datetime, /) -> OccurrenceLike | None: ...


@dataclass(frozen=True)
class PlannedJob:
    """One job to make: keyed by ``instant``; a coalesced job covers more."""

    instant: datetime
    covers_from: datetime | None = None
    covers_count: int | None = None
    folded_last: datetime | None = None  # coalesced: the newest occurrence folded in

    def folded(self) -> PlannedSkip | None:
        """The ``coalesced`` ledger range of the occurrences this job covers besides its own."""
        if self.covers_from is None or self.folded_last is None or not self.covers_count:
            return None
        folded = self.covers_count - 1
        return PlannedSkip(SkipReason.COALESCED, self.covers_from, self.folded_last, folded)

    @property
    def occurrences(self) -> int:
        return self.covers_count or 1

    @property
    def first_instant(self) -> datetime:
        return self.covers_from or self.instant


@dataclass(frozen=True)
class PlannedSkip:
    """A range of occurrences that get no job of their own."""

    reason: SkipReason
    first: datetime
    last: datetime
    count: int


@dataclass(frozen=True)
class Coalescing:
    """A coalesced range counted over several transactions: its first instant and count."""

    first: datetime | None = None
    count: int = 0


@dataclass(frozen=True)
class Plan:
    jobs: tuple[PlannedJob, ...]
    skips: tuple[PlannedSkip, ...]  # misfire / dst / paused ranges (coalesced: see PlannedJob)
    cursor: datetime | None  # newest instant handled; None: nothing handled
    next: OccurrenceLike | None  # the first occurrence not yet handled
    coalescing: Coalescing = Coalescing()  # what the next transaction goes on counting

    @property
    def skipped(self) -> int:
        return sum(s.count for s in self.skips)

    @property
    def coalesced(self) -> int:
        return sum(j.occurrences - 1 for j in self.jobs)


@dataclass
class Span:
    """The occurrences of a rule in ``[start, end)``: regular ones and DST-skipped ones."""

    count: int = 0
    first: datetime | None = None
    last: datetime | None = None
    penultimate: datetime | None = None
    dst_count: int = 0
    dst_first: datetime | None = None
    dst_last: datetime | None = None
    next: OccurrenceLike | None = None  # the first occurrence at or after ``end``

    @property
    def newest(self) -> datetime | None:
        candidates = [t for t in (self.last, self.dst_last) if t is not None]
        return max(candidates) if candidates else None


def scan(
    rule: RuleLike,
    start: OccurrenceLike | None,
    end: datetime,
    step: timedelta | None = None,
    period: timedelta | None = None,
    limit: int | None = None,
) -> Span:
    """Count the occurrences from ``start`` (inclusive) up to ``end`` (exclusive).

    With ``step`` (a fixed interval: instants are ``start + k * step``) the count
    is arithmetic. With ``period`` (the rule repeats itself exactly every
    ``period``) one period is walked and multiplied. Otherwise the rule is
    walked one occurrence at a time, at most ``limit`` of them: then
    ``Span.next`` is still before ``end``.
    """
    if start is None or start.instant >= end:
        return Span(next=start)
    if step is not None and step > timedelta(0) and not start.skipped:
        n = -((start.instant - end) // step)  # ceil((end - start) / step), exact
        last = start.instant + (n - 1) * step
        return Span(
            count=n,
            first=start.instant,
            last=last,
            penultimate=last - step if n >= 2 else None,
            next=rule.next_after(last),
        )
    if period is not None and start.instant + 3 * period < end:
        return _scan_periodic(rule, start, end, period, limit)
    return _walk(rule, start, end, limit)


def _walk(
    rule: RuleLike, start: OccurrenceLike | None, end: datetime, limit: int | None = None
) -> Span:
    """Walk ``[start, end)``; with ``limit``, stop after that many (``next`` is then < end)."""
    span = Span()
    occ = start
    while occ is not None and occ.instant < end:
        if limit is not None and span.count + span.dst_count >= limit:
            break
        if occ.skipped:
            span.dst_count += 1
            span.dst_first = span.dst_first or occ.instant
            span.dst_last = occ.instant
        else:
            span.count += 1
            span.first = span.first or occ.instant
            span.penultimate = span.last
            span.last = occ.instant
        occ = rule.next_after(occ.instant)
    span.next = occ
    return span


def _scan_periodic(
    rule: RuleLike, start: OccurrenceLike, end: datetime, period: timedelta, limit: int | None
) -> Span:
    """Walk one period, multiply, and walk the remainder (no DST-skipped occurrences)."""
    sample = _walk(rule, start, start.instant + period, limit)
    if sample.count == 0 or sample.dst_count or sample.last is None or sample.next is None:
        return _walk(rule, start, end, limit)
    if sample.next.instant < start.instant + period:  # the limit cut the period short
        return sample
    k = (end - start.instant) // period  # whole periods from start, >= 3
    base = start.instant + k * period
    tail = _walk(rule, rule.next_after(base - _TINY), end, limit)
    if tail.dst_count or (tail.next is not None and tail.next.instant < end):
        return _walk(rule, start, end, limit)
    shift = (k - 1) * period
    last_full = sample.last + shift
    penultimate_full = (
        sample.penultimate + shift
        if sample.penultimate is not None
        else sample.last + (k - 2) * period
    )
    if tail.count >= 2:
        last, penultimate = tail.last, tail.penultimate
    elif tail.count == 1:
        last, penultimate = tail.last, last_full
    else:
        last, penultimate = last_full, penultimate_full
    return Span(
        count=k * sample.count + tail.count,
        first=start.instant,
        last=last,
        penultimate=penultimate,
        next=tail.next,
    )


# Zones with one fixed UTC offset, where a cron rule repeats exactly.
_FIXED_ZONES = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "GMT", "Etc/GMT"}
)


def repeat_period(spec: ScheduleSpec) -> timedelta | None:
    """The period after which a cron rule repeats exactly in UTC, when it is obvious.

    In a fixed-offset zone (UTC): the smallest unit above which every field is
    ``*`` (a restricted day of week: a week). In a zone with DST, only a rule
    for every minute of every hour and day under the default DST handling
    (real time: a gap's minutes do not exist, a fold's run twice) repeats,
    every minute of UTC. Never with exclusions.
    """
    if spec.cron is None or spec.exclude_dates:
        return None
    fields = spec.cron.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        return None
    _sec, minute, hour, dom, month, dow = fields
    if dom != "*" or month != "*":
        return None
    fixed_zone = spec.timezone in _FIXED_ZONES or spec.timezone.startswith("Etc/GMT")
    if not fixed_zone:
        every_minute = minute == "*" and hour == "*" and dow in ("*", "?")
        return timedelta(minutes=1) if every_minute and spec.dst is None else None
    if dow not in ("*", "?"):
        return timedelta(days=7)
    if hour != "*":
        return timedelta(days=1)
    if minute != "*":
        return timedelta(hours=1)
    return timedelta(minutes=1)


@dataclass
class _Builder:
    skip_reason: SkipReason
    jobs: list[PlannedJob] = field(default_factory=list)
    skips: list[PlannedSkip] = field(default_factory=list)
    cursor: datetime | None = None
    dst: list[datetime] = field(default_factory=list)

    def handled(self, instant: datetime | None) -> None:
        if instant is not None and (self.cursor is None or instant > self.cursor):
            self.cursor = instant

    def skip_span(self, span: Span) -> None:
        if span.count and span.first is not None and span.last is not None:
            self.skips.append(PlannedSkip(self.skip_reason, span.first, span.last, span.count))
        self.dst_span(span)
        self.handled(span.newest)

    def dst_span(self, span: Span) -> None:
        if span.dst_count and span.dst_first is not None and span.dst_last is not None:
            skip = PlannedSkip(SkipReason.DST, span.dst_first, span.dst_last, span.dst_count)
            self.skips.append(skip)

    def one_by_one(
        self, rule: RuleLike, occ: OccurrenceLike | None, now: datetime, budget: int
    ) -> OccurrenceLike | None:
        """Make a job for each occurrence up to ``now``, at most ``budget``; returns the next."""
        while occ is not None and occ.instant <= now:
            if occ.skipped:
                self.dst.append(occ.instant)
            else:
                if len(self.jobs) >= budget:
                    break
                self.jobs.append(PlannedJob(occ.instant))
            self.handled(occ.instant)
            occ = rule.next_after(occ.instant)
        return occ

    def plan(self, nxt: OccurrenceLike | None, coalescing: Coalescing = Coalescing()) -> Plan:
        if self.dst:
            self.skips.append(PlannedSkip(SkipReason.DST, self.dst[0], self.dst[-1], len(self.dst)))
        return Plan(tuple(self.jobs), tuple(self.skips), self.cursor, nxt, coalescing)


def plan_due(
    rule: RuleLike,
    spec: ScheduleSpec,
    first: OccurrenceLike | None,
    now: datetime,
    budget: int,
    *,
    skip_reason: SkipReason = SkipReason.MISFIRE,
    carried: Coalescing = Coalescing(),
    last_counted: datetime | None = None,
) -> Plan:
    """Decide the due occurrences from ``first`` (the oldest unhandled) up to ``now``.

    ``skip_reason`` names skipped ranges (``paused`` when resuming). At most
    ``budget`` jobs are planned; when it runs out, ``Plan.next`` is still due
    and the next transaction goes on from there. ``carried`` is a coalesced
    range an earlier transaction counted (``last_counted``: the newest instant
    it handled); it ends in one job once the count reaches now.
    """
    b = _Builder(skip_reason)
    if carried.count:
        if budget < 1:
            return b.plan(first, carried)
        if first is None or first.instant > now:
            # Nothing more is due (the rule changed or ended): the counted
            # range becomes its job now, keyed by its newest instant.
            if last_counted is not None:
                b.jobs.append(_covering(last_counted, carried.first, carried.count, None))
            return b.plan(first)
        step = spec.every if spec.every is not None and not spec.exclude_dates else None
        end = now + timedelta(microseconds=1)
        return _coalesce(b, rule, first, end, now, step, repeat_period(spec), carried, last_counted)
    if first is None or first.instant > now:
        return b.plan(first)
    catch_up = spec.misfire is MisfirePolicy.CATCH_UP
    keep = spec.catch_up_window if catch_up else spec.grace
    cutoff = now - keep  # older than this: skipped (catch_up, skip) or coalesced
    if first.instant >= cutoff:  # the common case: nothing is late, run each one
        return b.plan(b.one_by_one(rule, first, now, budget))
    step = spec.every if spec.every is not None and not spec.exclude_dates else None
    period = repeat_period(spec)
    end_of_due = now + timedelta(microseconds=1)  # due: instant <= now
    if catch_up or spec.misfire is MisfirePolicy.SKIP:
        older = scan(rule, first, cutoff, step, period, limit=WALK_LIMIT)
        b.skip_span(older)
        if older.next is not None and older.next.instant < cutoff:
            return b.plan(older.next)  # walked as far as one transaction may: go on next time
        return b.plan(b.one_by_one(rule, older.next, now, budget))
    # coalesce: some are late (beyond grace). Counted at most WALK_LIMIT
    # occurrences per transaction: a longer range is carried in `coalescing`
    # (stored on the schedule) until the walk reaches now and one job covers it all.
    if budget < 1:
        return b.plan(b.one_by_one(rule, first, now, budget), carried)
    return _coalesce(b, rule, first, end_of_due, now, step, period, carried, last_counted)


def _coalesce(
    b: _Builder,
    rule: RuleLike,
    first: OccurrenceLike | None,
    end_of_due: datetime,
    now: datetime,
    step: timedelta | None,
    period: timedelta | None,
    carried: Coalescing,
    last_counted: datetime | None,
) -> Plan:
    due = scan(rule, first, end_of_due, step, period, limit=WALK_LIMIT)
    b.dst_span(due)
    b.handled(due.newest)
    count = carried.count + due.count
    since = carried.first or due.first
    if due.next is not None and due.next.instant <= now:  # cut by the limit: go on next time
        return b.plan(due.next, Coalescing(since, count))
    last = due.last if due.last is not None else last_counted
    if count and last is not None:
        penultimate = due.penultimate if due.count >= 2 else last_counted
        b.jobs.append(_covering(last, since, count, penultimate))
    return b.plan(due.next)


def _covering(
    last: datetime, since: datetime | None, count: int, penultimate: datetime | None
) -> PlannedJob:
    """The one job of a coalesced range: keyed by its newest occurrence, covering ``count``."""
    if count == 1 or since is None:
        return PlannedJob(last)
    return PlannedJob(last, covers_from=since, covers_count=count, folded_last=penultimate or since)
