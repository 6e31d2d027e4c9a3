"""``rota preview FILE NAME --from ISO --count N --json`` prints the references' instants.

End to end, as an operator (and the acceptance check) sees it: a schedule
file in UTC, read by ``rota preview``; the instants must be cronsim's for cron
and dateutil's for an RRULE with DTSTART (a mixed BYDAY list: their union, as
RFC 5545 reads it). Most cases run the entry point in-process; one runs the
console script.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from rota.cli.main import main
from rota.core.timefmt import parse_instant
from tests.support.rules_helpers import cronsim_instants, dateutil_instants

COUNT = 20
CRON = {
    "odd-mondays": ("0 0 */2 * 1", "2026-01-01T00:00:00Z"),
    "mondays-at-nine": ("0 9 */1 * 1", "2026-01-01T00:00:00Z"),
    "first-of-month": ("0 0 1 * */1", "2026-01-01T00:00:00Z"),
    "at-five-past": ("5-5/20 * * * *", "2026-01-01T00:00:00Z"),
    "sundays": ("0 9 * * 7-7", "2026-01-01T00:00:00Z"),
    "every-other-weekday": ("0 0 * * 1/2", "2026-01-01T00:00:00Z"),
    "thirteenth-or-second-friday": ("0 0 13 * 5#2", "2026-01-01T00:00:00Z"),
    "first-or-second-monday": ("0 0 1 * 1#2", "2026-01-01T00:00:00Z"),
    "last-weekday": ("0 0 LW * *", "2026-01-01T00:00:00Z"),
    "office-seconds": ("*/20 30 9-17 * * MON-FRI", "2026-03-06T16:00:00Z"),
}
RRULE = {
    "second-weekday": (
        "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=2",
        "2026-03-04T10:00:00Z",
    ),
    "weekdays-and-first-saturday": (
        "DTSTART:20260101T090000\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR,1SA",
        "2026-01-30T12:00:00Z",
    ),
    "month-end": (
        "DTSTART:20260105T020000\n"
        "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=2;BYMINUTE=0;BYSECOND=0",
        "2026-06-15T00:00:00Z",
    ),
    "fortnightly-sunday-week": (
        "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=SU,MO,SA;BYSETPOS=1",
        "2026-03-04T10:00:00Z",
    ),
    "ten-thursdays": (
        "DTSTART:20260108T170000\nRRULE:FREQ=WEEKLY;BYDAY=TH;COUNT=10",
        "2026-02-01T00:00:00Z",
    ),
}


@pytest.fixture(scope="module")
def schedule_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    lines = ["job_types:", "  work: {handler: app.jobs:work}", "schedules:"]
    for name, (cron, _) in CRON.items():
        lines += [f"  {name}:", "    job_type: work", f'    cron: "{cron}"']
    for name, (rrule, _) in RRULE.items():
        lines += [f"  {name}:", "    job_type: work", "    rrule: |"]
        lines += [f"      {line}" for line in rrule.splitlines()]
    path = tmp_path_factory.mktemp("preview") / "schedules.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _preview(capsys: pytest.CaptureFixture[str], path: str, name: str, start: str) -> list[str]:
    code = main(["preview", path, name, "--from", start, "--count", str(COUNT), "--json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return [entry["instant"] for entry in json.loads(out)]


@pytest.mark.parametrize("name", sorted(CRON))
def test_preview_of_a_cron_gives_cronsims_instants(
    schedule_file: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cron, start = CRON[name]
    expected = cronsim_instants(cron, _at(start), COUNT)
    assert expected is not None and len(expected) == COUNT
    assert _preview(capsys, schedule_file, name, start) == expected


@pytest.mark.parametrize("name", sorted(RRULE))
def test_preview_of_an_rrule_gives_dateutils_instants(
    schedule_file: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rrule, start = RRULE[name]
    expected = dateutil_instants(rrule, _at(start), COUNT)
    assert expected  # the ten Thursdays end within the 20 asked for
    assert _preview(capsys, schedule_file, name, start) == expected


def test_preview_through_the_console_script(schedule_file: str) -> None:
    rota = Path(sys.executable).parent / "rota"
    cron, start = CRON["thirteenth-or-second-friday"]
    argv = ["preview", schedule_file, "thirteenth-or-second-friday", "--from", start]
    done = subprocess.run(
        [str(rota), *argv, "--count", str(COUNT), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    got = [entry["instant"] for entry in json.loads(done.stdout)]
    assert got == cronsim_instants(cron, _at(start), COUNT)


def _at(text: str) -> datetime:
    return parse_instant(text)
