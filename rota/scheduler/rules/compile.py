"""``compile_rule``: a ``ScheduleSpec`` to the ``Rule`` that computes its occurrences."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rota.core.config import UNIX_EPOCH, ScheduleSpec
from rota.scheduler.rules.calendar import SEARCH_HORIZON, CalendarRule, WallSource
from rota.scheduler.rules.cron import CronWalls, parse_cron
from rota.scheduler.rules.every import EveryRule
from rota.scheduler.rules.occurrence import Rule, RuleError
from rota.scheduler.rules.policy import wall_policy
from rota.scheduler.rules.recurrence import (
    DEFAULT_DTSTART,
    DEFAULT_WEEKLY_DTSTART,
    RRuleWalls,
    parse_rrule,
)
from rota.scheduler.rules.zones import load_zone

_TINY = timedelta(microseconds=1)


def compile_rule(spec: ScheduleSpec) -> Rule:
    """The rule of ``spec``; raises ``RuleError`` with a message saying what is wrong."""
    given = [
        name
        for name, value in (("cron", spec.cron), ("rrule", spec.rrule), ("every", spec.every))
        if value is not None
    ]
    if len(given) != 1:
        raise RuleError(
            f"give exactly one of cron, rrule or every (got {', '.join(given) or 'none'})"
        )
    zone = load_zone(spec.timezone)
    if spec.every is not None:
        if spec.dst is not None:
            raise RuleError("dst does not apply to every: rules (pure UTC arithmetic)", field="dst")
        if spec.exclude_dates:
            raise RuleError(
                "exclude_dates needs a calendar rule (cron or rrule)", field="exclude_dates"
            )
        return EveryRule(every=spec.every, zone=zone, anchor=spec.anchor or UNIX_EPOCH)
    if spec.anchor is not None:
        raise RuleError("anchor only applies to every: rules", field="anchor")
    walls: WallSource
    if spec.cron is not None:
        cron = parse_cron(spec.cron)
        walls, fixed_time = CronWalls(cron), cron.is_fixed_time()
    else:
        assert spec.rrule is not None
        rrule = parse_rrule(spec.rrule)
        walls, fixed_time = RRuleWalls(rrule), rrule.is_fixed_time()
    return CalendarRule(
        walls=walls,
        zone=zone,
        policy=wall_policy(spec, fixed_time=fixed_time),
        exclude_dates=frozenset(spec.exclude_dates),
    )


def verify_rule(spec: ScheduleSpec, now: datetime) -> Rule:
    """``compile_rule``, then prove the rule usable; what ``rota check`` asks of every rule.

    Refused (``RuleError``): a rule with no occurrence within ``SEARCH_HORIZON``
    (100 years) of its start (the RRULE's DTSTART, else ``now``), and one whose
    next occurrence costs too much to find (``RuleTooCostly``: after ``now``,
    and for a COUNT series after its end, the costliest point).
    """
    rule = compile_rule(spec)
    start = now
    walls = rule.walls if isinstance(rule, CalendarRule) else None
    expr = walls.expr if isinstance(walls, RRuleWalls) else None  # parsed once, by compile_rule
    if expr is not None and expr.dtstart not in (DEFAULT_DTSTART, DEFAULT_WEEKLY_DTSTART):
        start = expr.dtstart.replace(tzinfo=load_zone(spec.timezone)).astimezone(UTC)
    first = rule.next_after(start - _TINY)
    if first is None or first.instant > start + SEARCH_HORIZON:
        raise RuleError(f"{spec.rule_text} never fires within 100 years of {start:%Y-%m-%d}")
    if start != now:
        rule.next_after(now)
    if expr is not None and expr.has_count:
        rule.next_after(now + SEARCH_HORIZON)
    return rule
