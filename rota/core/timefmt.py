"""UTC instants: the occurrence key format and ISO-8601 input."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_key(instant: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ``, the instant part of an occurrence key."""
    u = as_utc(instant)
    # Not strftime: it does not pad years before 1000 on every platform.
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z"


def as_utc(instant: datetime) -> datetime:
    if instant.tzinfo is None:
        raise ValueError(f"naive datetime {instant!r}: rota only handles aware instants")
    return instant.astimezone(UTC)


def parse_instant(text: str) -> datetime:
    """Parse an ISO-8601 instant; a missing offset means UTC."""
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"bad instant {text!r}: use ISO-8601, like 2026-03-29T01:00:00Z") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_zoned_instant(text: str) -> datetime:
    """Parse an ISO-8601 instant that must carry its offset (``Z`` or ``+01:00``).

    For a time at which something runs: a missing offset would be a guess, as
    ``rota.enqueue`` refuses a naive datetime.
    """
    value = parse_instant(text)
    s = text.strip()
    if not s.endswith(("Z", "z")) and datetime.fromisoformat(s).tzinfo is None:
        wall = value.replace(tzinfo=None).isoformat()
        raise ValueError(f"{text!r} has no time zone: add one, like {wall}Z or {wall}+01:00")
    return value


# A manual run's key is "<schedule>@manual:<now>": never equal to a regular key.
MANUAL_KEY_MARK = "@manual:"


def occurrence_key(schedule_name: str, instant: datetime) -> str:
    return f"{schedule_name}@{utc_key(instant)}"
