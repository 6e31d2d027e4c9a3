"""Cron expressions: 5 fields, or 6 with seconds first, evaluated in naive wall time.

croniter does the field matching; it is only ever given naive wall times, so
its own DST handling never comes into play (``scheduler.rules.walltime`` decides
what a wall time means). croniter's 6-field order puts seconds last, so 6-field
expressions are read with ``second_at_beginning=True``.

The aliases ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/
``@midnight`` and ``@hourly`` stand for their usual 5-field expressions.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

from croniter import CroniterBadDateError, CroniterError, croniter

from scheduler.rules.occurrence import RuleError

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_PROBE_START = datetime(2000, 1, 1)  # noqa: DTZ001 - a naive wall time on purpose
_ONE_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class CronExpr:
    """A parsed cron expression; ``fields`` are in the order they were written."""

    text: str
    fields: tuple[str, ...]

    @property
    def has_seconds(self) -> bool:
        return len(self.fields) == 6

    @property
    def minute_field(self) -> str:
        return self.fields[1 if self.has_seconds else 0]

    @property
    def hour_field(self) -> str:
        return self.fields[2 if self.has_seconds else 1]

    def is_fixed_time(self) -> bool:
        """Vixie cron's rule: fixed-time when neither minute nor hour starts with ``*``."""
        return not self.minute_field.startswith("*") and not self.hour_field.startswith("*")

    def iterator(self, start: datetime) -> croniter:
        """A croniter whose ``get_next`` gives wall times strictly after naive ``start``.

        The expression is expanded once (``_template``); each iterator is a
        shallow copy of it moved to ``start``, which costs a fraction of parsing.
        """
        it = copy.copy(self._template)
        it.set_current(start, force=True)
        return it

    @cached_property
    def _template(self) -> croniter:
        return croniter(
            " ".join(self.fields),
            _PROBE_START,
            ret_type=datetime,
            second_at_beginning=self.has_seconds,
        )


def parse_cron(text: str) -> CronExpr:
    """Parse and check a cron expression; raises ``RuleError`` saying what is wrong."""
    stripped = text.strip()
    expanded = ALIASES.get(stripped.lower(), stripped)
    if expanded.startswith("@"):
        names = ", ".join(sorted(ALIASES))
        raise RuleError(f"bad cron {text!r}: unknown alias (known: {names})")
    fields = tuple(expanded.split())
    if len(fields) not in (5, 6):
        raise RuleError(
            f"bad cron {text!r}: {len(fields)} fields; cron needs 5 "
            "(minute hour day-of-month month day-of-week) or 6 with seconds first"
        )
    expr = CronExpr(text=stripped, fields=fields)
    try:
        expr.iterator(_PROBE_START).get_next(datetime)
    except CroniterBadDateError:
        raise RuleError(f"bad cron {text!r}: it never matches any date") from None
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise RuleError(f"bad cron {text!r}: {exc}") from None
    return expr


@dataclass(frozen=True)
class CronWalls:
    """The wall times a cron expression names."""

    expr: CronExpr

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        it = self.expr.iterator(start - _ONE_SECOND)
        while True:
            try:
                wall: datetime = it.get_next(datetime)
            except CroniterBadDateError:  # no match within croniter's own horizon
                return
            if wall > horizon:
                return
            yield wall
