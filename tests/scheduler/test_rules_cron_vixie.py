"""Cron fields as Vixie cron and cronie read them (cronsim follows them), in UTC.

Each case is an expression rota once read as croniter does, with the instants
cron gives; the day-of-month/day-of-week rule, equal ranges, ``a/n`` in the
weekday field, ``#`` and ``L`` beside a restricted day of month. Random fields
(``R``, ``H``) are refused: every replica must compute the same instants.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rota.cli.main import main
from rota.scheduler.rules import RuleError, compile_rule
from tests.support.rules_helpers import instants, spec

JAN_1 = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        # A day field starting with `*` is unrestricted: both day fields must match.
        ("0 0 */2 * 1", ["2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z", "2026-02-09T00:00:00Z"]),
        ("0 9 */1 * 1", ["2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z", "2026-01-19T09:00:00Z"]),
        ("0 0 1 * */1", ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z"]),
        ("0 0 */3 * */2", ["2026-01-04T00:00:00Z", "2026-01-10T00:00:00Z", "2026-01-13T00:00:00Z"]),
        # Both restricted: either one.
        ("0 0 13 * 5", ["2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z"]),
    ],
)
def test_day_fields_starting_with_a_star_are_unrestricted(cron: str, expected: list[str]) -> None:
    assert instants(spec(cron=cron), JAN_1, 3) == expected


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("5-5 * * * *", ["2026-01-01T00:05:00Z", "2026-01-01T01:05:00Z", "2026-01-01T02:05:00Z"]),
        ("0 9 * * 7-7", ["2026-01-04T09:00:00Z", "2026-01-11T09:00:00Z", "2026-01-18T09:00:00Z"]),
        (
            "5-5/20 * * * *",
            ["2026-01-01T00:05:00Z", "2026-01-01T01:05:00Z", "2026-01-01T02:05:00Z"],
        ),
        ("0 0 9-9 * *", ["2026-01-09T00:00:00Z", "2026-02-09T00:00:00Z", "2026-03-09T00:00:00Z"]),
    ],
)
def test_an_equal_range_is_its_one_value(cron: str, expected: list[str]) -> None:
    assert instants(spec(cron=cron), JAN_1, 3) == expected


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        # 7 is Sunday; `a/n` runs from a to the end of the field, 7 included.
        ("0 0 * * 7/1", ["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-18T00:00:00Z"]),
        (
            "0 0 * * 1/2",
            [
                "2026-01-02T00:00:00Z",  # Fri
                "2026-01-04T00:00:00Z",  # Sun (7)
                "2026-01-05T00:00:00Z",  # Mon
                "2026-01-07T00:00:00Z",  # Wed
            ],
        ),
        ("0 0 * * MON/3", ["2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z"]),
    ],
)
def test_weekday_start_and_step_includes_sunday_as_7(cron: str, expected: list[str]) -> None:
    assert instants(spec(cron=cron), "2025-12-31T12:00:00Z", len(expected)) == expected


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        # Both day fields restricted: the 13th, or the second Friday (cronsim's OR).
        (
            "0 0 13 * 5#2",
            [
                "2026-01-09T00:00:00Z",
                "2026-01-13T00:00:00Z",
                "2026-02-13T00:00:00Z",
                "2026-03-13T00:00:00Z",
                "2026-04-10T00:00:00Z",
                "2026-04-13T00:00:00Z",
            ],
        ),
        # The 1st, or the second Monday: matches, where rota refused it as "never".
        (
            "0 0 1 * 1#2",
            [
                "2026-01-12T00:00:00Z",
                "2026-02-01T00:00:00Z",
                "2026-02-09T00:00:00Z",
                "2026-03-01T00:00:00Z",
            ],
        ),
        # The 15th, or the last Friday.
        (
            "0 0 15 * 5L",
            [
                "2026-01-15T00:00:00Z",
                "2026-01-30T00:00:00Z",
                "2026-02-15T00:00:00Z",
                "2026-02-27T00:00:00Z",
            ],
        ),
        # Unrestricted day of month: only the second Friday.
        ("0 0 * * 5#2", ["2026-01-09T00:00:00Z", "2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z"]),
        # The last day of the month, or any Monday.
        ("0 0 L * 1", ["2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z"]),
        # The last weekday (Mon-Fri) of the month.
        ("0 0 LW * *", ["2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-31T00:00:00Z"]),
    ],
)
def test_nth_and_last_weekday_with_a_restricted_day_of_month_is_a_union(
    cron: str, expected: list[str]
) -> None:
    assert instants(spec(cron=cron), JAN_1, len(expected)) == expected


@pytest.mark.parametrize(
    "cron", ["R R * * *", "0 R * * *", "H * * * *", "0 0 * * R", "R 0 * * * *"]
)
def test_random_fields_are_refused(cron: str) -> None:
    with pytest.raises(RuleError, match="is not deterministic"):
        compile_rule(spec(cron=cron))


def test_check_refuses_a_random_field_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        "job_types:\n"
        "  work: {handler: app.jobs:work}\n"
        "schedules:\n"
        "  daily:\n"
        "    job_type: work\n"
        '    cron: "R R * * *"\n'
    )
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:6: schedule 'daily', cron:" in err
    assert "is not deterministic" in err
    assert "Traceback" not in err
