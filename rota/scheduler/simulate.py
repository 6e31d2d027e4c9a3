"""What a schedule change does to the firings: the instants it adds and removes.

``rota apply FILE --dry-run --simulate D`` compares, over the window
``(start, start + D]``, the firings of each schedule's stored definition with
those of the file's. A *firing* is an occurrence that runs (DST-skipped wall
times never do) together with its ``run_after`` (the nominal instant plus the
schedule's deterministic jitter), so a change that only moves the jitter, or a
time zone that moves the instants, shows every moved firing as one removed and
one added. Both definitions are walked by the rule engine the scheduler uses
(``scheduler.rules``) and jittered by ``scheduler.jitter``: a simulation cannot
disagree with what the replicas will do.

Each definition is taken as in force over the whole window: an added or revived
schedule had no firings before, a removed one has none after. The work is
bounded: the simulation refuses (``SimulationTooLarge``) once it would list more
than ``max_listed`` firings, or compare more than ``max_compared`` (firings the
two definitions share are compared but not listed). Schedules whose rule, zone,
DST policy, exclusions and jitter are unchanged are not walked at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from rota.core.config import ScheduleSpec
from rota.scheduler.apply import ApplyResult
from rota.scheduler.jitter import run_after
from rota.scheduler.rules import Occurrence, compile_rule, iter_between

MAX_LISTED = 100_000
MAX_COMPARED = 250_000  # about 2 s of rule evaluation

Sign = Literal["+", "-"]


@dataclass(frozen=True)
class Firing:
    """One occurrence that runs: its nominal instant (the key's), local time, DST note."""

    occurrence: Occurrence
    run_after: datetime  # the nominal instant plus the jitter offset

    @property
    def key(self) -> tuple[datetime, datetime]:
        return (self.occurrence.instant, self.run_after)


@dataclass(frozen=True)
class FiringChange:
    sign: Sign  # "+": the change adds this firing; "-": it removes it
    firing: Firing


@dataclass(frozen=True)
class ScheduleChange:
    """One schedule to simulate: its definition before (None: did not fire) and after."""

    name: str
    change: str  # added | changed | revived | removed
    before: ScheduleSpec | None
    after: ScheduleSpec | None
    paused: bool = False


@dataclass(frozen=True)
class ScheduleSimulation:
    name: str
    change: str
    paused: bool
    firings: tuple[FiringChange, ...]  # by nominal instant, "-" before "+"

    @property
    def added(self) -> int:
        return sum(c.sign == "+" for c in self.firings)

    @property
    def removed(self) -> int:
        return sum(c.sign == "-" for c in self.firings)


@dataclass(frozen=True)
class Simulation:
    start: datetime
    end: datetime
    schedules: tuple[ScheduleSimulation, ...]

    @property
    def added(self) -> int:
        return sum(s.added for s in self.schedules)

    @property
    def removed(self) -> int:
        return sum(s.removed for s in self.schedules)


class SimulationTooLarge(ValueError):
    """The window holds more firings than a simulation lists or compares."""

    def __init__(self, what: str, limit: int, schedule: str) -> None:
        super().__init__(f"it would {what} more than {limit:,} firings (reached at {schedule!r})")
        self.limit = limit
        self.schedule = schedule


class _Budget:
    def __init__(self, max_listed: int, max_compared: int) -> None:
        self.max_listed = max_listed
        self.max_compared = max_compared
        self.listed = 0
        self.compared = 0

    def compare(self, name: str) -> None:
        self.compared += 1
        if self.compared > self.max_compared:
            raise SimulationTooLarge("compare", self.max_compared, name)

    def list(self, name: str) -> None:
        self.listed += 1
        if self.listed > self.max_listed:
            raise SimulationTooLarge("list", self.max_listed, name)


def simulate(
    changes: Sequence[ScheduleChange],
    start: datetime,
    end: datetime,
    *,
    max_listed: int = MAX_LISTED,
    max_compared: int = MAX_COMPARED,
) -> Simulation:
    """The firings each change adds and removes in ``(start, end]``, schedule by schedule."""
    budget = _Budget(max_listed, max_compared)
    out = tuple(
        ScheduleSimulation(c.name, c.change, c.paused, tuple(_diff(c, start, end, budget)))
        for c in changes
    )
    return Simulation(start, end, out)


def changes_of(result: ApplyResult, file: Mapping[str, ScheduleSpec]) -> list[ScheduleChange]:
    """What to simulate for an apply (``result``, usually a dry run) of the file's schedules."""
    return [
        *(ScheduleChange(n, "added", None, file[n]) for n in result.added),
        *(ScheduleChange(n, "revived", None, file[n]) for n in result.revived),
        *(
            ScheduleChange(n, "changed", result.before.get(n), file[n], n in result.paused)
            for n in result.changed
        ),
        *(
            ScheduleChange(n, "removed", result.before.get(n), None, n in result.paused)
            for n in result.removed
        ),
    ]


def fires_alike(a: ScheduleSpec, b: ScheduleSpec) -> bool:
    """Whether two definitions of one schedule make the same firings (nothing to walk)."""
    return a.name == b.name and a.rule_hash() == b.rule_hash() and a.jitter == b.jitter


def firings(spec: ScheduleSpec, start: datetime, end: datetime) -> Iterator[Firing]:
    """The occurrences of ``spec`` that run in ``(start, end]``, with their jittered instant."""
    for occ in iter_between(compile_rule(spec), start, end):
        if not occ.skipped:
            yield Firing(occ, run_after(spec.name, occ.instant, spec.jitter))


def _diff(
    change: ScheduleChange, start: datetime, end: datetime, budget: _Budget
) -> Iterator[FiringChange]:
    """Merge the two ascending streams of firings; yield those only one side has."""
    before, after = change.before, change.after
    if before is not None and after is not None and fires_alike(before, after):
        return
    old = _counted(firings(before, start, end) if before else iter(()), change.name, budget)
    new = _counted(firings(after, start, end) if after else iter(()), change.name, budget)
    a, b = next(old, None), next(new, None)
    while a is not None or b is not None:
        # By nominal instant; at one instant the old firing goes first.
        take_old = a is not None and (b is None or a.key[0] <= b.key[0])
        take_new = b is not None and (a is None or b.key[0] <= a.key[0])
        if a is not None and b is not None and a.key == b.key:  # unchanged firing
            a, b = next(old, None), next(new, None)
            continue
        if take_old and a is not None:
            budget.list(change.name)
            yield FiringChange("-", a)
            a = next(old, None)
        if take_new and b is not None:
            budget.list(change.name)
            yield FiringChange("+", b)
            b = next(new, None)


def _counted(stream: Iterator[Firing], name: str, budget: _Budget) -> Iterator[Firing]:
    for firing in stream:
        budget.compare(name)
        yield firing
