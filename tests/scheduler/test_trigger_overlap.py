"""``rota trigger`` (the CLI, ``POST /schedules/{name}/trigger`` and the dashboard, one
path) honours the schedule's overlap policy, as the scheduler does for its occurrences.

* ``forbid``: while a run is unfinished the trigger is refused (409 problem+json,
  ``rota trigger`` exits 1) and nothing is recorded: no job, no operator action.
* ``replace``: the unfinished runs are asked to cancel, then the manual run is made.
* ``allow``: the manual run is made beside the running one.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from rota.cli.main import main
from rota.core.config import OverlapPolicy
from rota.core.operator_notes import ActionNote
from rota.core.tables import operator_actions
from rota.operations.schedules import OverlapForbidden, trigger
from rota.scheduler.service import SchedulerService
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.scheduler_helpers import MIN, T0, apply_specs, jobs_of, schedule_row, spec

NOTE = ActionNote.of("tester", "by hand")


def actions(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(operator_actions)).scalar_one())


def one_run_unfinished(engine: Engine, policy: OverlapPolicy) -> str:
    """Schedule ``s`` with ``policy`` and one regular run waiting; its state."""
    apply_specs(engine, spec(overlap=policy))
    SchedulerService(engine).run_once(T0 + MIN)
    (run,) = jobs_of(engine)
    return str(run["state"])


def test_forbid_refuses_while_a_run_is_unfinished_and_records_nothing(engine: Engine) -> None:
    assert one_run_unfinished(engine, OverlapPolicy.FORBID) == "QUEUED"
    before = schedule_row(engine)
    with pytest.raises(OverlapForbidden, match="overlap: forbid") as info:
        trigger(engine, "s", note=NOTE)
    assert "s@2026-03-02T00:01:00Z" in str(info.value)
    assert len(jobs_of(engine)) == 1
    assert actions(engine) == 0
    assert schedule_row(engine) == before


def test_forbid_triggers_once_nothing_runs(engine: Engine) -> None:
    apply_specs(engine, spec(overlap=OverlapPolicy.FORBID))
    first = trigger(engine, "s", note=NOTE)
    with pytest.raises(OverlapForbidden):
        trigger(engine, "s", note=NOTE)
    assert [j["job_id"] for j in jobs_of(engine)] == [first.job_id]


def test_replace_asks_the_running_one_to_cancel_then_makes_the_run(engine: Engine) -> None:
    one_run_unfinished(engine, OverlapPolicy.REPLACE)
    result = trigger(engine, "s", note=NOTE)
    by_id = {j["job_id"]: j for j in jobs_of(engine)}
    assert len(by_id) == 2
    assert by_id[result.job_id]["state"] == "QUEUED"
    (old,) = [j for i, j in by_id.items() if i != result.job_id]
    assert old["state"] == "CANCELLED"  # waiting: cancelled at once, as `rota cancel` does
    assert result.replaced == (old["job_id"],)


def test_allow_makes_a_second_run_beside_the_first(engine: Engine) -> None:
    one_run_unfinished(engine, OverlapPolicy.ALLOW)
    result = trigger(engine, "s", note=NOTE)
    assert [j["state"] for j in jobs_of(engine)] == ["QUEUED", "QUEUED"]
    assert result.replaced == ()


def test_the_api_answers_409_and_records_nothing(engine: Engine) -> None:
    one_run_unfinished(engine, OverlapPolicy.FORBID)
    with running_api(engine) as base:
        r = loopback.post(f"{base}/schedules/s/trigger", json={"reason": "again"})
    assert r.status_code == 409
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["type"] == "urn:rota:problem:overlap-forbidden"
    assert "overlap: forbid" in body["detail"]
    assert len(jobs_of(engine)) == 1
    assert actions(engine) == 0


def test_the_cli_exits_1_with_a_message_and_records_nothing(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    one_run_unfinished(engine, OverlapPolicy.FORBID)
    assert main(["trigger", "s", "--db", db_url]) == 1
    err = capsys.readouterr().err
    assert "overlap: forbid" in err and "Traceback" not in err
    assert len(jobs_of(engine)) == 1
    assert actions(engine) == 0
