"""Which DST policy a rule gets: the contract's "DST rule, precisely".

A *fixed-time* rule names a time of day: a cron whose minute and hour fields
both do not start with ``*`` (Vixie cron's rule: ``30 2 * * *`` is fixed,
``*/15 * * * *``, ``0 * * * *`` and ``* 2 * * *`` are not), or an RRULE whose
FREQ is DAILY or coarser. Without a ``dst:`` block

* a fixed-time rule shifts gap wall times to the transition instant and runs a
  repeated wall time once, at its first instant (``shift``/``first``): a daily
  job runs exactly once on both DST days;
* any other rule follows real time: a gap wall time does not exist and does not
  run (it is not even reported as skipped), a repeated wall time runs at both
  instants (``skip``/``both``).

An explicit ``dst:`` block overrides both for every wall time of the rule, and
with it ``nonexistent: skip`` reports each dropped wall time as a skipped
occurrence. ``every:`` rules are pure UTC arithmetic and have no DST policy.
"""

from __future__ import annotations

from rota.core.config import Ambiguous, DstPolicy, Nonexistent, ScheduleSpec
from rota.scheduler.rules.cron import parse_cron
from rota.scheduler.rules.recurrence import parse_rrule
from rota.scheduler.rules.walltime import WallPolicy

FIXED_TIME_DEFAULT = DstPolicy(nonexistent=Nonexistent.SHIFT, ambiguous=Ambiguous.FIRST)
REAL_TIME_DEFAULT = DstPolicy(nonexistent=Nonexistent.SKIP, ambiguous=Ambiguous.BOTH)


def is_fixed_time(spec: ScheduleSpec) -> bool:
    """Whether the rule names a time of day (see the module docstring); False for every:."""
    if spec.cron is not None:
        return parse_cron(spec.cron).is_fixed_time()
    if spec.rrule is not None:
        return parse_rrule(spec.rrule).is_fixed_time()
    return False


def default_dst(fixed_time: bool) -> DstPolicy:
    return FIXED_TIME_DEFAULT if fixed_time else REAL_TIME_DEFAULT


def effective_dst(spec: ScheduleSpec) -> DstPolicy | None:
    """The policy the rule runs with: its ``dst:`` block or the default; None for every:."""
    if spec.every is not None:
        return None
    if spec.dst is not None:
        return spec.dst
    return default_dst(is_fixed_time(spec))


def wall_policy(spec: ScheduleSpec, *, fixed_time: bool) -> WallPolicy:
    """The effective policy of a calendar rule, plus whether skipped gap wall times are reported."""
    dst = spec.dst if spec.dst is not None else default_dst(fixed_time)
    return WallPolicy(
        nonexistent=dst.nonexistent,
        ambiguous=dst.ambiguous,
        report_skipped=spec.dst is not None,
    )
