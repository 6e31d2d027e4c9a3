"""`rota check` and `rota preview` through the real entry point; no database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from freezegun import freeze_time

from rota.cli.main import main

GOOD = """\
job_types:
  work:
    handler: app.jobs:work
schedules:
  nightly:
    job_type: work
    cron: "30 2 * * *"
    timezone: Europe/Berlin
  skipper:
    job_type: work
    cron: "30 2 * * *"
    timezone: Europe/Berlin
    dst: {nonexistent: skip}
  quarter:
    job_type: work
    cron: "*/15 * * * *"
    timezone: Europe/Berlin
  ping:
    job_type: work
    every: 90s
    anchor: 2026-01-01T00:00:00Z
    timezone: Australia/Lord_Howe
  once:
    job_type: work
    rrule: |
      DTSTART:20260101T120000
      RRULE:FREQ=DAILY;COUNT=2
"""

BAD = """\
job_types:
  work:
    handler: app.jobs:work
schedules:
  nightly:
    job_type: wrok
    cron: "30 2 * *"
    timezone: Europe/Berlin
"""


@pytest.fixture
def good(tmp_path: Path) -> str:
    path = tmp_path / "schedules.yaml"
    path.write_text(GOOD)
    return str(path)


@pytest.fixture
def bad(tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return str(path)


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- check -------------------------------------------------------------------


def test_check_ok(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert rota(capsys, "check", good) == (0, "ok: 5 schedules, 1 job types\n", "")


def test_check_bad_file_lists_every_problem(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = rota(capsys, "check", bad)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{bad}:6: schedule 'nightly', job_type: unknown job type 'wrok'; did you mean 'work'?"
        " (declare it under job_types)",
        f"{bad}:7: schedule 'nightly', cron: bad cron '30 2 * *': 4 fields; cron needs 5"
        " (minute hour day-of-month month day-of-week) or 6 with seconds first",
    ]


def test_check_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.yaml")
    assert rota(capsys, "check", missing) == (
        2,
        "",
        f"{missing}:1: cannot read the file: No such file or directory\n",
    )


def test_check_through_the_console_script_prints_no_traceback(bad: str) -> None:
    rota_script = Path(sys.executable).parent / "rota"
    done = subprocess.run(
        [str(rota_script), "check", bad], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"{bad}:7: schedule 'nightly', cron: bad cron" in done.stderr


# --- preview -----------------------------------------------------------------


def test_preview_text_marks_dst_effects(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = rota(
        capsys, "preview", good, "nightly", "--from", "2026-03-27T12:00:00Z", "--count", "3"
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "nightly: cron 30 2 * * * in Europe/Berlin;"
        " dst: nonexistent=shift, ambiguous=first (default for a fixed-time rule)",
        "2026-03-28T01:30:00Z  2026-03-28T02:30:00+01:00",
        "2026-03-29T01:00:00Z  2026-03-29T03:00:00+02:00  shifted from 02:30 by the DST gap",
        "2026-03-30T00:30:00Z  2026-03-30T02:30:00+02:00",
    ]


def test_preview_json(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = rota(
        capsys,
        "preview",
        good,
        "quarter",
        "--from",
        "2026-10-25T00:30:00Z",
        "--count",
        "3",
        "--json",
    )
    assert code == 0
    assert json.loads(out) == [
        {
            "instant": "2026-10-25T00:45:00Z",
            "local": "2026-10-25T02:45:00+02:00",
            "note": "first of the repeated 02:45",
        },
        {
            "instant": "2026-10-25T01:00:00Z",
            "local": "2026-10-25T02:00:00+01:00",
            "note": "second of the repeated 02:00",
        },
        {
            "instant": "2026-10-25T01:15:00Z",
            "local": "2026-10-25T02:15:00+01:00",
            "note": "second of the repeated 02:15",
        },
    ]


def test_preview_skipped_wall_times(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ("preview", good, "skipper", "--from", "2026-03-27T12:00:00Z", "--count", "2")
    code, out, _ = rota(capsys, *base)
    assert code == 0
    assert out.splitlines()[1:] == [
        "2026-03-28T01:30:00Z  2026-03-28T02:30:00+01:00",
        "(not run)             2026-03-29                 skipped: 02:30 does not exist (DST gap)",
        "2026-03-30T00:30:00Z  2026-03-30T02:30:00+02:00",
    ]
    # JSON lists fire instants only, unless asked for the skipped ones too.
    code, out, _ = rota(capsys, *base, "--json")
    assert [o["instant"] for o in json.loads(out)] == [
        "2026-03-28T01:30:00Z",
        "2026-03-30T00:30:00Z",
    ]
    code, out, _ = rota(capsys, *base, "--json", "--with-skipped")
    assert json.loads(out) == [
        {"instant": "2026-03-28T01:30:00Z", "local": "2026-03-28T02:30:00+01:00", "note": None},
        {
            "instant": "2026-03-29T01:00:00Z",
            "local": "2026-03-29T03:00:00+02:00",
            "note": "skipped: 02:30 does not exist (DST gap)",
        },
        {"instant": "2026-03-30T00:30:00Z", "local": "2026-03-30T02:30:00+02:00", "note": None},
    ]


@freeze_time("2026-06-01T10:00:00Z")
def test_preview_defaults_to_now(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = rota(capsys, "preview", good, "ping", "--count", "2", "--json")
    assert code == 0
    # Now is a whole number of 90s steps after the anchor: the next one is strictly after.
    assert json.loads(out) == [
        {"instant": "2026-06-01T10:01:30Z", "local": "2026-06-01T20:31:30+10:30", "note": None},
        {"instant": "2026-06-01T10:03:00Z", "local": "2026-06-01T20:33:00+10:30", "note": None},
    ]


def test_preview_of_an_exhausted_rule(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = rota(capsys, "preview", good, "once", "--from", "2026-01-01T00:00:00Z")
    assert code == 0
    assert out.splitlines() == [
        "once: rrule DTSTART:20260101T120000 RRULE:FREQ=DAILY;COUNT=2 in UTC;"
        " dst: nonexistent=shift, ambiguous=first (default for a fixed-time rule)",
        "2026-01-01T12:00:00Z  2026-01-01T12:00:00+00:00",
        "2026-01-02T12:00:00Z  2026-01-02T12:00:00+00:00",
        "(no more occurrences)",
    ]
    code, out, _ = rota(capsys, "preview", good, "once", "--from", "2026-02-01", "--json")
    assert (code, json.loads(out)) == (0, [])


def test_preview_unknown_schedule(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = rota(capsys, "preview", good, "nightli")
    assert (code, out) == (2, "")
    assert err == (
        f"rota preview: no schedule 'nightli' in {good}; did you mean 'nightly'?"
        " (schedules: nightly, skipper, quarter, ping, once)\n"
    )


def test_preview_bad_from_and_count(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = rota(capsys, "preview", good, "nightly", "--from", "yesterday")
    assert code == 2
    assert err == (
        "rota preview: --from: bad instant 'yesterday': use ISO-8601, like 2026-03-29T01:00:00Z\n"
    )
    code, _, err = rota(capsys, "preview", good, "nightly", "--count", "0")
    assert code == 2
    assert "argument --count: must be between 1 and 10,000 (a whole number), got '0'" in err


def test_preview_refuses_a_bad_file(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = rota(capsys, "preview", bad, "nightly")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 2
    assert err.startswith(f"{bad}:6: ")
