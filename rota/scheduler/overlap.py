"""The overlap policy: what a new occurrence does while a previous run is unfinished.

Pure: given the planned jobs of one schedule (oldest first) and the ids of its
unfinished runs, decide which jobs to make, which occurrences to record as
``overlap`` skips, and which runs to ask to cancel.

* ``allow``: make every job.
* ``forbid``: while a run is unfinished, an occurrence is skipped. With no run
  unfinished the first planned job is made and the later ones are skipped (it
  is their unfinished predecessor).
* ``replace``: the unfinished runs are asked to cancel and the newest planned
  job is made; older planned ones in the same batch would be replaced at once,
  so they are skipped instead of made and cancelled.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from rota.core.config import OverlapPolicy
from rota.core.states import SkipReason
from rota.scheduler.misfire import PlannedJob, PlannedSkip


@dataclass(frozen=True)
class OverlapDecision:
    make: tuple[PlannedJob, ...]
    skips: tuple[PlannedSkip, ...]
    cancel: tuple[uuid.UUID, ...]


def decide_overlap(
    policy: OverlapPolicy, planned: Sequence[PlannedJob], unfinished: Sequence[uuid.UUID]
) -> OverlapDecision:
    if policy is OverlapPolicy.ALLOW or not planned:
        return OverlapDecision(tuple(planned), (), ())
    if policy is OverlapPolicy.FORBID:
        make = () if unfinished else (planned[0],)
        skipped = planned[len(make) :]
        return OverlapDecision(make, _as_skip(skipped), ())
    return OverlapDecision((planned[-1],), _as_skip(planned[:-1]), tuple(unfinished))


def _as_skip(jobs: Sequence[PlannedJob]) -> tuple[PlannedSkip, ...]:
    if not jobs:
        return ()
    count = sum(j.occurrences for j in jobs)
    return (PlannedSkip(SkipReason.OVERLAP, jobs[0].first_instant, jobs[-1].instant, count),)
