"""Time zone names to ``ZoneInfo`` (IANA names from tzdata), with a hint for typos."""

from __future__ import annotations

import difflib
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from rota.scheduler.rules.occurrence import RuleError


def load_zone(name: str) -> ZoneInfo:
    """The zone called ``name``; raises ``RuleError`` with a "did you mean" hint."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        pass
    hint = _suggest(name)
    suffix = f"; did you mean {hint!r}?" if hint else " (use an IANA name like Europe/Berlin)"
    raise RuleError(f"unknown time zone {name!r}{suffix}", field="timezone")


def _suggest(name: str) -> str | None:
    names = _zone_names()
    by_lower = {n.lower(): n for n in names}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


@cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())
