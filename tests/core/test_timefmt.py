"""The instant format of occurrence keys: YYYY-MM-DDTHH:MM:SSZ, always four-digit years."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from rota.core.timefmt import occurrence_key, parse_instant, utc_key


def test_keys_are_utc_with_seconds_and_a_padded_year() -> None:
    berlin_summer = timezone(timedelta(hours=2))
    assert utc_key(datetime(2026, 3, 29, 3, 0, 30, 999, tzinfo=berlin_summer)) == (
        "2026-03-29T01:00:30Z"
    )
    assert utc_key(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"
    assert occurrence_key("nightly", parse_instant("2026-03-01T02:00:00Z")) == (
        "nightly@2026-03-01T02:00:00Z"
    )
