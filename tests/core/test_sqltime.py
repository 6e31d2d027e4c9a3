"""Reading stored instants: always an aware UTC datetime, the same instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from rota.core.sqltime import read_utc

INSTANT = datetime(2026, 3, 29, 1, 30, 15, 123456, tzinfo=UTC)  # a DST change in Europe


@pytest.mark.parametrize(
    "zone",
    [
        UTC,
        ZoneInfo("UTC"),
        ZoneInfo("Etc/UTC"),
        ZoneInfo("Europe/Berlin"),
        ZoneInfo("America/St_Johns"),
        timezone(timedelta(hours=5, minutes=30)),
        timezone(timedelta(0), "not-utc-by-name"),
    ],
    ids=str,
)
def test_an_aware_instant_reads_back_as_the_same_instant_in_utc(zone: tzinfo) -> None:
    stored = INSTANT.astimezone(zone)  # as psycopg gives it, in the session's zone
    read = read_utc(stored)
    assert read == INSTANT
    assert read is not None and read.tzinfo is UTC
    assert (read.hour, read.minute, read.second, read.microsecond) == (1, 30, 15, 123456)


def test_sqlite_text_and_naive_values_are_utc() -> None:
    assert read_utc("2026-03-29 01:30:15.123456") == INSTANT
    assert read_utc("2026-03-29T03:30:15.123456+02:00") == INSTANT
    assert read_utc(INSTANT.replace(tzinfo=None)) == INSTANT
    assert read_utc(None) is None
