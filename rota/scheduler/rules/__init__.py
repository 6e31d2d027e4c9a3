"""Schedule rules to occurrences: a pure function of (rule, zone, DST policy, previous instant).

``compile_rule(spec)`` turns a ``ScheduleSpec`` into a ``Rule``; ``rule.next_after(t)``
is the first ``Occurrence`` strictly later than the instant ``t``. Nothing here
reads a clock, a database or any state kept between calls: the scheduler passes
the previous instant in, and every replica computes the same answer.

Three kinds of rule:

* cron (``scheduler.rules.cron``) and RRULE (``scheduler.rules.recurrence``, its
  work bounded by ``scheduler.rules.rrule_meter``) name wall times in the
  schedule's zone; ``scheduler.rules.calendar`` walks them and
  ``scheduler.rules.walltime`` turns each into instants under the DST policy;
* ``every:`` (``scheduler.rules.every``) is pure UTC arithmetic.

The DST policy a rule gets is in ``scheduler.rules.policy``; what the policies do
to a wall time in a gap or a fold is in ``scheduler.rules.walltime``.

Guarantees: every result's instant is strictly later than ``after``; fed back
its own instant, ``next_after`` yields strictly increasing instants, each once
(gap wall times that shift onto one transition instant are merged into one
occurrence). Skipped occurrences (explicit ``nonexistent: skip``) are yielded
too, with ``skipped=True``, at the gap's transition instant.
"""

from rota.scheduler.rules.compile import compile_rule, verify_rule
from rota.scheduler.rules.iterate import iter_between, iter_range
from rota.scheduler.rules.occurrence import Occurrence, Rule, RuleError
from rota.scheduler.rules.policy import effective_dst, is_fixed_time

__all__ = [
    "Occurrence",
    "Rule",
    "RuleError",
    "compile_rule",
    "effective_dst",
    "is_fixed_time",
    "iter_between",
    "iter_range",
    "verify_rule",
]
