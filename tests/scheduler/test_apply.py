"""``rota apply``: the table follows the file, in one transaction, on both backends."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from rota.cli.main import main
from rota.core.tables import job_types, schedules
from rota.scheduler.apply import apply_file
from rota.scheduler.schedule_file.errors import ConfigError
from rota.scheduler.service import SchedulerService
from tests.support.scheduler_helpers import MIN, T0, jobs_of, schedule_row

HEAD = """\
job_types:
  work:
    handler: tests.handlers.plain:noop
    max_attempts: 3
schedules:
"""


def write(tmp_path: Path, body: str, name: str = "schedules.yaml") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body)
    return path


V1 = """\
  a:
    job_type: work
    every: 1m
    misfire: catch_up
  b:
    job_type: work
    cron: "*/5 * * * *"
"""

V2 = """\
  a:
    job_type: work
    every: 2m
    misfire: catch_up
    jitter: 5s
  c:
    job_type: work
    every: 1h
"""


def _table(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(schedules).order_by(schedules.c.name))]


def test_apply_reports_added_changed_removed_and_unchanged(engine: Engine, tmp_path: Path) -> None:
    first = apply_file(engine, write(tmp_path, V1), now=T0)
    assert first.added == ("a", "b") and first.job_types == {"work": "added"}
    row = schedule_row(engine, "a")
    assert row["cursor_at"] == T0 and row["next_fire_at"] == T0 + MIN
    assert schedule_row(engine, "b")["next_fire_at"] == T0 + 5 * MIN

    again = apply_file(engine, write(tmp_path, V1), now=T0 + MIN)
    assert not again.has_changes and again.unchanged == 2

    second = apply_file(engine, write(tmp_path, V2), now=T0 + 2 * MIN)
    assert second.added == ("c",)
    assert second.changed == {"a": ("every", "jitter")}
    assert second.removed == ("b",)
    text = second.render()
    assert "~ a  (changed: every, jitter)" in text and "- b  (removed" in text
    assert "1 added, 1 changed, 0 revived, 1 removed, 0 unchanged" in text


def test_dry_run_prints_the_same_diff_and_changes_nothing(engine: Engine, tmp_path: Path) -> None:
    apply_file(engine, write(tmp_path, V1), now=T0)
    before = _table(engine)
    dry = apply_file(engine, write(tmp_path, V2), dry_run=True, now=T0 + MIN)
    assert _table(engine) == before
    real = apply_file(engine, write(tmp_path, V2), now=T0 + MIN)
    assert (dry.added, dry.changed, dry.removed) == (real.added, real.changed, real.removed)
    assert "dry run" in dry.render()


def test_a_bad_file_applies_nothing(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, V1 + '  d:\n    job_type: nope\n    cron: "61 * * * *"\n')
    code = main(["apply", str(bad), "--db", db_url])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}:" in err and "nothing was applied" in err
    assert all(line.startswith(f"{bad}:") for line in err.splitlines()[:-1])
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schedules)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(job_types)).scalar_one() == 0


def test_cli_apply_and_dry_run(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, V1)
    assert main(["apply", str(path), "--dry-run", "--db", db_url]) == 0
    assert "+ a  (added)" in capsys.readouterr().out
    assert _table(engine) == []
    assert main(["apply", str(path), "--db", db_url]) == 0
    assert "2 added" in capsys.readouterr().out
    assert [r[0] for r in _table(engine)] == ["a", "b"]


def test_removal_keeps_the_row_and_its_jobs_and_stops_firing(
    engine: Engine, tmp_path: Path
) -> None:
    apply_file(engine, write(tmp_path, V1), now=T0)
    service = SchedulerService(engine)
    service.run_once(T0 + 5 * MIN)
    assert len(jobs_of(engine, "b")) == 1
    apply_file(engine, write(tmp_path, V2), now=T0 + 6 * MIN)
    row = schedule_row(engine, "b")
    assert row["removed"] and row["next_fire_at"] is None
    service.run_once(T0 + timedelta(hours=2))
    assert len(jobs_of(engine, "b")) == 1  # kept, and no new ones
    # re-added: revived from now, nothing replayed for the time it was gone
    revived = apply_file(engine, write(tmp_path, V1), now=T0 + timedelta(hours=3))
    assert revived.revived == ("b",)
    row = schedule_row(engine, "b")
    assert not row["removed"] and row["next_fire_at"] == T0 + timedelta(hours=3, minutes=5)
    service.run_once(T0 + timedelta(hours=3, minutes=5))
    assert [j["scheduled_for"] for j in jobs_of(engine, "b")] == [
        T0 + 5 * MIN,
        T0 + timedelta(hours=3, minutes=5),
    ]


def test_a_rule_change_never_replays_the_past(engine: Engine, tmp_path: Path) -> None:
    apply_file(engine, write(tmp_path, V1), now=T0)
    service = SchedulerService(engine)
    service.run_once(T0 + 3 * MIN)
    assert len(jobs_of(engine, "a")) == 3
    # the scheduler is away for a while; the new rule applies from its next occurrence
    apply_file(engine, write(tmp_path, V2), now=T0 + 10 * MIN + timedelta(seconds=30))
    row = schedule_row(engine, "a")
    assert row["cursor_at"] == T0 + 10 * MIN + timedelta(seconds=30)
    assert row["next_fire_at"] == T0 + 12 * MIN
    service.run_once(T0 + 12 * MIN)
    assert [j["scheduled_for"] for j in jobs_of(engine, "a")] == [
        T0 + MIN,
        T0 + 2 * MIN,
        T0 + 3 * MIN,
        T0 + 12 * MIN,
    ]


def test_a_change_that_keeps_the_rule_keeps_the_cursor(engine: Engine, tmp_path: Path) -> None:
    apply_file(engine, write(tmp_path, V1), now=T0)
    SchedulerService(engine).run_once(T0 + 3 * MIN)
    apply_file(
        engine,
        write(tmp_path, V1.replace("    misfire: catch_up\n", "    misfire: skip\n")),
        now=T0 + 10 * MIN,
    )
    row = schedule_row(engine, "a")
    assert row["cursor_at"] == T0 + 3 * MIN and row["next_fire_at"] == T0 + 4 * MIN


def test_a_file_without_job_types_may_name_stored_ones_only(engine: Engine, tmp_path: Path) -> None:
    """The job_types section is optional: then the schedules' job types must be stored."""
    with_types = tmp_path / "types.yaml"
    with_types.write_text("job_types:\n  report.generate:\n    handler: m:f\nschedules: {}\n")
    only_schedules = tmp_path / "schedules.yaml"
    only_schedules.write_text(
        "schedules:\n"
        "  nightly:\n"
        "    job_type: report.generate\n"
        "    cron: '0 2 * * *'\n"
        "  other:\n"
        "    job_type: invoice.generate\n"
        "    cron: '0 3 * * *'\n"
    )
    apply_file(engine, with_types)
    with pytest.raises(ConfigError) as refused:
        apply_file(engine, only_schedules)
    assert [str(p) for p in refused.value.problems] == [
        f"{only_schedules}:6: schedule 'other', job_type: unknown job type 'invoice.generate' "
        "(not stored by an earlier `rota apply`; declare it under job_types)"
    ]
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schedules)).scalar_one() == 0
    only_schedules.write_text(only_schedules.read_text().replace("invoice", "report"))
    assert apply_file(engine, only_schedules).added == ("nightly", "other")


def test_config_option_applies_the_file_first(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, V1)
    assert main(["schedules", "--config", str(path), "--json", "--db", db_url]) == 0
    out = capsys.readouterr()
    assert "2 added" in out.err
    assert [d["name"] for d in json.loads(out.out)] == ["a", "b"]
    bad = write(tmp_path, "  x:\n    job_type: nope\n    every: 1m\n", "bad.yaml")
    assert main(["pause", "a", "--config", str(bad), "--db", db_url]) == 2


def test_concurrent_applies_of_the_same_file_both_succeed(engine: Engine, tmp_path: Path) -> None:
    import threading

    path = write(tmp_path, V1)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            apply_file(engine, path, now=T0)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert [r[0] for r in _table(engine)] == ["a", "b"]


def test_check_and_apply_refuse_a_dot_dot_schedule_name_and_say_where(
    db_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, V1 + '  "..":\n    job_type: work\n    every: 1h\n')
    expected = (
        f"{path}:13: schedule '..': a name must not be '.' or '..' "
        "(a URL path cannot carry it: /schedules/.. is /)"
    )
    assert main(["check", str(path)]) == 2
    assert expected in capsys.readouterr().err.splitlines()
    assert main(["apply", str(path), "--db", db_url]) == 2
    assert expected in capsys.readouterr().err.splitlines()
    assert _table(engine) == []


def test_the_summary_counts_job_type_changes(engine: Engine, tmp_path: Path) -> None:
    first = apply_file(engine, write(tmp_path, V1), now=T0).render()
    assert first.splitlines()[-1] == (
        "2 added, 0 changed, 0 revived, 0 removed, 0 unchanged; "
        "job types: 1 added, 0 changed, 0 unchanged"
    )
    # Only the job type changes: the summary said "0 changed" and nothing more.
    path = write(tmp_path, V1)
    path.write_text(path.read_text().replace("max_attempts: 3", "max_attempts: 4"))
    dry = apply_file(engine, path, dry_run=True, now=T0 + MIN)
    assert dry.has_changes
    assert dry.render().splitlines()[-1] == (
        "0 added, 0 changed, 0 revived, 0 removed, 2 unchanged; "
        "job types: 0 added, 1 changed, 0 unchanged (dry run: nothing applied)"
    )
    # A job type the file no longer declares is kept (its pending jobs need it).
    other = path.read_text().replace(
        "job_types:\n  work:", "job_types:\n  other:\n    handler: m:f\n  work:"
    )
    path.write_text(other)
    apply_file(engine, path, now=T0 + 2 * MIN)
    path.write_text(path.read_text().replace("  other:\n    handler: m:f\n", ""))
    last = apply_file(engine, path, now=T0 + 3 * MIN).render()
    assert last.splitlines()[-1] == (
        "0 added, 0 changed, 0 revived, 0 removed, 2 unchanged; "
        "job types: 0 added, 0 changed, 1 unchanged, 1 no longer declared (kept)"
    )
