"""Durations as operators write them: ``500ms``, ``90s``, ``5m``, ``2h``, ``1d``, ``1h30m``."""

from __future__ import annotations

import re
from datetime import timedelta

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# ASCII digits only: \d would take other scripts' digits too ("\u0663s").
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")
_MAX_TEXT = 64
# No duration is longer than this (each field has its own, smaller range).
MAX_DURATION = timedelta(days=36_525)  # 100 years
_ORDER = ["d", "h", "m", "s", "ms"]


class DurationError(ValueError):
    pass


class DurationTooLong(DurationError):
    pass


def parse_duration(text: object) -> timedelta:
    """Parse a duration; a bare number is refused, since its unit would be a guess."""
    if not isinstance(text, str):
        raise DurationError(
            f"bad duration {text!r}: write it with a unit, like 90s, 5m, 2h, 1d or 1h30m"
        )
    s = text.strip()
    pos = 0
    total = 0.0
    last_rank = -1
    if not s:
        raise DurationError("empty duration")
    if len(s) > _MAX_TEXT:
        raise DurationError(f"bad duration {s[:20]!r}...: at most {_MAX_TEXT} characters")
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise DurationError(
                f"bad duration {text!r}: use a number and a unit (ms, s, m, h, d), "
                "like 500ms, 90s, 5m, 2h, 1d or 1h30m"
            )
        rank = _ORDER.index(m.group(2))
        if rank <= last_rank:
            raise DurationError(f"bad duration {text!r}: units must go from largest to smallest")
        last_rank = rank
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if total > MAX_DURATION.total_seconds():
        raise DurationTooLong(
            f"duration {s!r} is longer than {format_duration(MAX_DURATION)} (100 years)"
        )
    return timedelta(seconds=total)


def format_duration(delta: timedelta) -> str:
    """The shortest duration text that parses back to ``delta`` (to the millisecond)."""
    ms = round(delta.total_seconds() * 1000)
    if ms == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        n, ms = divmod(ms, size)
        if n:
            parts.append(f"{n}{unit}")
    if ms:
        parts.append(f"{ms}ms")
    return "".join(parts)
