"""``every:`` rules: a fixed interval in real time, pure UTC arithmetic.

The instants are ``anchor + k * every`` for whole k (the anchor defaults to the
Unix epoch). No calendar and no DST policy: across a DST change a 90s rule
still fires every 90 real seconds; ``local`` is only for display.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from rota.core.config import UNIX_EPOCH
from rota.core.durations import format_duration
from rota.core.timefmt import as_utc
from rota.scheduler.rules.occurrence import Occurrence, RuleError

_ONE_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class EveryRule:
    every: timedelta
    zone: ZoneInfo
    anchor: datetime = UNIX_EPOCH

    def __post_init__(self) -> None:
        # Occurrence keys carry whole seconds: a finer step would give two
        # occurrences the same key.
        if self.every < _ONE_SECOND or self.every % _ONE_SECOND:
            raise RuleError(
                f"every {format_duration(self.every)}: use a whole number of seconds, at least 1s"
            )
        if self.anchor.tzinfo is None:
            raise RuleError("anchor needs a UTC offset, like 2026-01-01T00:00:00Z", field="anchor")
        if self.anchor.microsecond:
            raise RuleError("anchor must be a whole second", field="anchor")

    def next_after(self, after: datetime) -> Occurrence | None:
        elapsed = as_utc(after) - self.anchor
        instant = as_utc(self.anchor + (elapsed // self.every + 1) * self.every)
        return Occurrence(instant=instant, local=instant.astimezone(self.zone), note=None)
