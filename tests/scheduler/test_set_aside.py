"""One bad schedule never stops the others (issue 7, item 17).

A schedule whose stored values were written around `rota check` (a huge
jitter, a payload_ref with a lone surrogate or a NUL) used to make every tick
raise: no schedule fired at all. Now it is set aside with its reason, logged
once, shown by `rota schedules`, and the healthy schedules beside it fire; a
corrected `rota apply` clears it. On both backends.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from sqlalchemy import Engine, update

from rota.cli.main import main
from rota.core.tables import schedules
from rota.scheduler.service import SchedulerService
from tests.support.scheduler_helpers import MIN, T0, apply_specs, jobs_of, schedule_row, spec


def bypass_check(engine: Engine, name: str, **values: Any) -> None:
    """Store a definition `rota check` would refuse, as a hand-written row would."""
    definition = {**spec(name).to_json(), **values}
    with engine.begin() as conn:
        conn.execute(
            update(schedules)
            .where(schedules.c.name == name)
            .values(definition=definition, definition_hash=f"bypass-{name}")
        )


def failures(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if getattr(r, "event", None) == "schedule_failed" and r.fields["schedule"] == name  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"jitter": "999999999d"}, "DurationTooLong: duration '999999999d' is longer than"),
        ({"payload_ref": "bad \ud800 ref"}, "Error"),  # refused by the database driver
    ],
)
def test_a_bad_schedule_is_set_aside_and_the_others_fire(
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    db_url: str,
    values: dict[str, Any],
    reason: str,
) -> None:
    apply_specs(engine, spec("bad"), spec("good"), spec("other"))
    bypass_check(engine, "bad", **values)
    service = SchedulerService(engine)
    with caplog.at_level(logging.ERROR, logger="rota.scheduler"):
        first = service.run_once(T0 + MIN)
        second = service.run_once(T0 + 3 * MIN)
    assert (first.created, second.created) == (2, 4)
    assert len(jobs_of(engine, "good")) == 3 and len(jobs_of(engine, "other")) == 3
    assert jobs_of(engine, "bad") == []
    row = schedule_row(engine, "bad")
    assert row["set_aside_reason"] is not None and reason in row["set_aside_reason"]
    assert row["cursor_at"] == T0  # nothing it missed is lost
    assert len(failures(caplog, "bad")) == 1  # logged once, not on every retry

    code = main(["schedules", "--json", "--db", db_url])
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert code == 0
    assert listed["bad"]["set_aside_reason"] == row["set_aside_reason"]
    assert listed["good"]["set_aside_reason"] is None
    main(["schedules", "--db", db_url])
    assert "bad  [set aside]" in capsys.readouterr().out

    # A corrected apply clears the reason; the misfire policy (coalesce) covers the gap.
    apply_specs(engine, spec("bad"), spec("good"), spec("other"), now=T0 + 4 * MIN)
    assert schedule_row(engine, "bad")["set_aside_reason"] is None
    service.run_once(T0 + 4 * MIN)
    made = jobs_of(engine, "bad")
    assert [j["scheduled_for"] for j in made] == [T0 + 4 * MIN]
    assert made[0]["covers_count"] == 4


def test_apply_evaluates_rules_before_taking_the_write_lock(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 18: a slow rule evaluation must not hold SQLite's write lock (PostgreSQL: the
    apply lock), or `rota enqueue`, `rota pause` and the scheduler wait behind it."""
    import sqlite3

    from rota.core.database import make_engine
    from rota.migrations.runner import upgrade
    from rota.scheduler import apply as apply_module

    path = tmp_path / "rota.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    evaluated: list[str] = []
    real_next_fire = apply_module._next_fire

    def next_fire_while_others_write(s: Any, after: Any) -> Any:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" if apply holds it
            other.execute("ROLLBACK")
        finally:
            other.close()
        evaluated.append(s.name)
        return real_next_fire(s, after)

    monkeypatch.setattr(apply_module, "_next_fire", next_fire_while_others_write)
    apply_specs(engine, spec("a"), spec("b"))
    assert sorted(evaluated) == ["a", "b"]
    assert schedule_row(engine, "a")["next_fire_at"] == T0 + MIN
    engine.dispose()
