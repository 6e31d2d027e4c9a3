"""``rota apply FILE --dry-run --simulate D``: the firings a change adds and removes."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from rota.cli.main import main
from rota.core.durations import format_duration
from rota.core.tables import schedules
from rota.scheduler.jitter import run_after
from rota.scheduler.simulate import ScheduleChange, SimulationTooLarge, simulate
from tests.support.scheduler_helpers import spec

HOUR = timedelta(hours=1)
HEAD = """\
job_types:
  work:
    handler: tests.handlers.plain:noop
schedules:
"""

NIGHTLY = """\
  nightly:
    job_type: work
    cron: "0 2 * * *"
    timezone: Europe/Berlin
"""

HOURLY = """\
  hourly:
    job_type: work
    every: 1h
"""


def rota(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def applied(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str], body: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(HEAD + body)
    assert rota(capsys, "apply", str(path), "--db", db_url)[0] == 0
    return path


def simulated(
    capsys: pytest.CaptureFixture[str], db_url: str, path: Path, *extra: str
) -> tuple[int, str, str]:
    return rota(capsys, "apply", str(path), "--db", db_url, "--dry-run", "--simulate", *extra)


def firing_lines(out: str) -> list[str]:
    """The ``+ instant`` / ``- instant`` lines (after the apply's own ``+ name`` lines)."""
    listing = out.split("\nfirings over ", 1)[1].splitlines()
    return [line for line in listing if line.startswith(("+ ", "- "))]


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def test_a_cron_moved_from_2_to_3_across_the_spring_gap_in_berlin(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, NIGHTLY + HOURLY)
    with engine.connect() as conn:
        before = [tuple(r) for r in conn.execute(select(schedules))]
    path.write_text(HEAD + NIGHTLY.replace('"0 2 * * *"', '"0 3 * * *"') + HOURLY)

    code, out, err = simulated(capsys, db_url, path, "30d", "--from", "2026-03-15T00:00:00Z")

    assert code == 0, err
    # Until Sunday 29 March, CET (+01:00): 02:00 is 01:00Z, 03:00 is 02:00Z.
    expected = []
    for d in days(date(2026, 3, 15), date(2026, 3, 28)):
        expected += [
            f"- {d}T01:00:00Z  {d}T02:00:00+01:00",
            f"+ {d}T02:00:00Z  {d}T03:00:00+01:00",
        ]
    # 29 March: 02:00 does not exist; the old rule shifts it to 03:00 CEST,
    # 01:00Z, the very firing of the new rule: nothing changes that day.
    # From 30 March, CEST (+02:00): 02:00 is 00:00Z, 03:00 is 01:00Z.
    for d in days(date(2026, 3, 30), date(2026, 4, 13)):
        expected += [
            f"- {d}T00:00:00Z  {d}T02:00:00+02:00",
            f"+ {d}T01:00:00Z  {d}T03:00:00+02:00",
        ]
    # The window ends at 2026-04-14T00:00:00Z inclusive: the old 02:00 CEST is
    # in it, the new 03:00 CEST (01:00Z) is not.
    expected.append("- 2026-04-14T00:00:00Z  2026-04-14T02:00:00+02:00")
    assert firing_lines(out) == expected
    assert "firings over 30d, after 2026-03-15T00:00:00Z up to 2026-04-14T00:00:00Z:" in out
    assert "nightly (changed): 29 added, 30 removed" in out.splitlines()
    assert "hourly" not in out.split("firings over")[1]  # unchanged: not listed
    assert out.rstrip().endswith("29 firings added, 30 removed (dry run: nothing applied)")
    with engine.connect() as conn:
        assert [tuple(r) for r in conn.execute(select(schedules))] == before


def test_the_autumn_fold_keeps_previews_dst_notes(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, NIGHTLY)
    path.write_text(HEAD + NIGHTLY.replace('"0 2 * * *"', '"30 2 * * *"'))

    code, out, err = simulated(capsys, db_url, path, "2d", "--from", "2026-10-24T12:00:00Z")

    assert code == 0, err
    # Sunday 25 October: 02:00-02:59 happen twice; a fixed-time rule runs the first.
    assert firing_lines(out) == [
        "- 2026-10-25T00:00:00Z  2026-10-25T02:00:00+02:00  first of the repeated 02:00",
        "+ 2026-10-25T00:30:00Z  2026-10-25T02:30:00+02:00  first of the repeated 02:30",
        "- 2026-10-26T01:00:00Z  2026-10-26T02:00:00+01:00",
        "+ 2026-10-26T01:30:00Z  2026-10-26T02:30:00+01:00",
    ]


def test_json_lists_each_firing_with_local_time_note_and_run_instant(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, NIGHTLY)
    path.write_text(HEAD + NIGHTLY.replace('"0 2 * * *"', '"30 2 * * *"'))

    code, out, err = simulated(
        capsys, db_url, path, "1d", "--from", "2026-03-28T12:00:00Z", "--json"
    )

    assert code == 0, err
    doc = json.loads(out)
    assert doc["from"] == "2026-03-28T12:00:00Z" and doc["to"] == "2026-03-29T12:00:00Z"
    assert (doc["added"], doc["removed"], doc["duration"]) == (0, 0, "1d")
    # 02:00 and 02:30 both fall in the gap and both shift to 03:00 CEST: same firing.
    assert doc["schedules"] == [
        {
            "name": "nightly",
            "change": "changed",
            "paused": False,
            "added": 0,
            "removed": 0,
            "firings": [],
        }
    ]
    code, out, _ = simulated(capsys, db_url, path, "2d", "--from", "2026-03-28T12:00:00Z", "--json")
    firings = json.loads(out)["schedules"][0]["firings"]
    assert firings[0] == {
        "change": "-",
        "instant": "2026-03-30T00:00:00Z",
        "local": "2026-03-30T02:00:00+02:00",
        "note": None,
        "run_after": "2026-03-30T00:00:00.000Z",
    }
    assert [f["change"] for f in firings] == ["-", "+"]


def test_a_jitter_change_shows_every_moved_firing(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, HOURLY)
    path.write_text(HEAD + HOURLY + "    jitter: 10m\n")

    code, out, err = simulated(capsys, db_url, path, "3h", "--from", "2026-06-01T00:00:00Z")

    assert code == 0, err
    expected = []
    for hour in (1, 2, 3):
        nominal = datetime(2026, 6, 1, hour, tzinfo=UTC)
        moved = run_after("hourly", nominal, timedelta(minutes=10))
        assert nominal < moved < nominal + timedelta(minutes=10)
        shown = moved.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moved.microsecond // 1000:03d}"
        expected += [
            f"- 2026-06-01T0{hour}:00:00Z  2026-06-01T0{hour}:00:00+00:00",
            f"+ {shown}Z  {shown}+00:00  (occurrence 2026-06-01T0{hour}:00:00Z + jitter "
            f"{format_duration(moved - nominal)})",
        ]
    assert firing_lines(out) == expected


def test_a_time_zone_change_moves_each_firing_and_an_equivalent_zone_moves_none(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, NIGHTLY)
    path.write_text(HEAD + NIGHTLY.replace("Europe/Berlin", "Europe/London"))
    code, out, _ = simulated(capsys, db_url, path, "1d", "--from", "2026-07-01T12:00:00Z")
    assert code == 0
    assert firing_lines(out) == [
        "- 2026-07-02T00:00:00Z  2026-07-02T02:00:00+02:00",
        "+ 2026-07-02T01:00:00Z  2026-07-02T02:00:00+01:00",
    ]
    path.write_text(HEAD + NIGHTLY.replace("Europe/Berlin", "Europe/Paris"))
    code, out, _ = simulated(capsys, db_url, path, "30d", "--from", "2026-07-01T12:00:00Z")
    assert code == 0 and firing_lines(out) == []
    assert "nightly (changed): 0 added, 0 removed" in out.splitlines()


def test_added_removed_and_other_changes(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, NIGHTLY + HOURLY.replace("1h", "1s"))
    # hourly: a payload change on a per-second schedule is not walked (and not refused).
    fast = HOURLY.replace("1h", "1s") + '    payload_ref: "s3://b/k"\n'
    added = "  weekly:\n    job_type: work\n    cron: '0 6 * * 1'\n"
    path.write_text(HEAD + fast + added)

    code, out, err = simulated(capsys, db_url, path, "400d", "--from", "2026-05-31T12:00:00Z")

    assert code == 0, err
    lines = out.split("firings over")[1].splitlines()
    assert "weekly (added): 58 added, 0 removed" in lines
    assert "hourly (changed): 0 added, 0 removed" in lines
    assert "nightly (removed): 0 added, 400 removed" in lines
    assert "+ 2026-06-01T06:00:00Z  2026-06-01T06:00:00+00:00" in lines
    assert "- 2026-06-01T00:00:00Z  2026-06-01T02:00:00+02:00" in lines


def test_a_paused_schedule_says_so(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, HOURLY)
    assert rota(capsys, "pause", "hourly", "--db", db_url, "--reason", "test")[0] == 0
    path.write_text(HEAD + HOURLY.replace("1h", "2h"))
    code, out, _ = simulated(capsys, db_url, path, "4h", "--from", "2026-06-01T00:00:00Z")
    assert code == 0
    assert "hourly (changed, paused: fires only once resumed): 0 added, 2 removed" in out


def test_more_than_100000_listed_firings_are_refused(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = applied(tmp_path, db_url, capsys, HOURLY)
    # Every minute at 30 s past: no firing in common with the old rule.
    path.write_text(HEAD + HOURLY.replace("1h", "1m") + "    anchor: 2026-01-01T00:00:30Z\n")
    # 69d: 99,360 added and 1,656 removed: more than the bound.
    code, out, err = simulated(capsys, db_url, path, "69d")
    assert code == 2 and out == ""
    assert err.strip() == (
        "rota: --simulate 69d: it would list more than 100,000 firings (reached at 'hourly'); "
        "simulate a shorter window"
    )


def test_the_list_bound_is_exact() -> None:
    old, new = spec("s", every=timedelta(hours=1)), spec("s", every=timedelta(minutes=30))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # 50 hours: the new rule adds the 50 half hours; the 50 whole hours are common.
    sim = simulate(
        [ScheduleChange("s", "changed", old, new)], start, start + 50 * HOUR, max_listed=50
    )
    assert (sim.added, sim.removed) == (50, 0)
    with pytest.raises(SimulationTooLarge, match="list more than 50 firings"):
        simulate(
            [ScheduleChange("s", "changed", old, new)], start, start + 51 * HOUR, max_listed=50
        )


def test_the_compare_bound_stops_a_walk_that_lists_little() -> None:
    old, new = spec("s", every=timedelta(seconds=1)), spec("s", every=timedelta(seconds=2))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(SimulationTooLarge, match="compare more than 1,000"):
        simulate(
            [ScheduleChange("s", "changed", old, new)],
            start,
            start + timedelta(hours=1),
            max_compared=1_000,
        )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--simulate", "30d"], "--simulate needs --dry-run"),
        (["--dry-run", "--simulate", "0s"], "must be longer than 0s"),
        (["--dry-run", "--simulate", "30"], "--simulate: bad duration '30'"),
        (["--dry-run", "--simulate", "101000d"], "longer than"),
        (["--dry-run", "--simulate", "1d", "--from", "soon"], "--from: bad instant 'soon'"),
        (["--dry-run", "--from", "2026-01-01T00:00:00Z"], "--from goes with --dry-run --simulate"),
        (["--dry-run", "--json"], "--json goes with --dry-run --simulate"),
        (
            ["--dry-run", "--simulate", "30d", "--from", "9999-12-20T00:00:00Z"],
            "out of the range",
        ),
    ],
)
def test_bad_simulations_exit_2_and_say_what(
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    path = applied(tmp_path, db_url, capsys, HOURLY)
    path.write_text(HEAD + HOURLY.replace("1h", "2h"))
    code, out, err = rota(capsys, "apply", str(path), "--db", db_url, *argv)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err
