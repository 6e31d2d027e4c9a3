"""Per-schedule health, workers by pool, long runs and unimportable handlers in GET /metrics.

Real scheduler ticks make the jobs, a real executor runs them, a real server
is scraped; the expected values are read from the jobs the run left.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.samples import Sample
from sqlalchemy import Engine, select

from rota.api.health_metrics import schedule_text
from rota.cli.main import main
from rota.core.queries.jobs_read import database_now
from rota.core.tables import jobs, schedules
from rota.core.timefmt import utc_key
from rota.executor.service import Executor
from rota.operations.schedules import pause
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from rota.scheduler.service import SchedulerService
from tests.api.test_metrics import samples, value
from tests.deploy.kit import tool
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import add_jobs, job_row, job_type, store_types, wait_for

FILE = """
job_types:
  health.ok:
    handler: tests.handlers.plain:noop
  health.fails:
    handler: tests.handlers.plain:permanent
    max_attempts: 1
  health.broken:
    handler: {broken}
schedules:
  works:
    job_type: health.ok
    every: 10s
  breaks:
    job_type: health.fails
    every: 10s
  resting:
    job_type: health.ok
    every: 10s
"""
BROKEN = "tests.handlers.no_such_module:handler"


def _ended(engine: Engine, name: str) -> list[tuple[str, datetime]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(jobs.c.state, jobs.c.scheduled_for).where(jobs.c.schedule_name == name)
        ).all()
    return [(r.state, r.scheduled_for) for r in rows]


def _scrape(engine: Engine) -> list[Sample]:
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        return samples(client.get("/metrics").text)


def _promtool_accepts(text: str) -> None:
    """``promtool check metrics``: the text format, parsed and linted by Prometheus's own tool."""
    promtool = tool("promtool", "Debian: apt-get install prometheus, which ships promtool")
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _named(all_samples: list[Sample], name: str) -> list[Sample]:
    return [s for s in all_samples if s.name == name]


def test_schedule_health_after_real_runs(
    engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with engine.connect() as conn:
        now = database_now(conn)
    apply_schedule_file(
        engine,
        load_schedule_text(FILE.format(broken=BROKEN), "h.yaml"),
        now=now - timedelta(seconds=35),
    )
    assert pause(engine, "resting")
    tick = SchedulerService(engine).run_once(now=now)
    assert tick.created >= 4
    slow = job_type("health.slow", handler="tests.handlers.plain:until_stopped")
    store_types(engine, slow)
    (slow_id,) = add_jobs(engine, slow)

    ex = Executor(
        engine, concurrency=16, listen=False, metrics_interval=3600, liveness_interval=0.2
    )
    ex.start()
    try:
        assert ex.unrunnable_types() == {"health.broken"}

        def all_ended() -> bool:
            ex.claim_once()
            ended = _ended(engine, "works") + _ended(engine, "breaks")
            return all(state in ("SUCCEEDED", "FAILED") for state, _ in ended)

        wait_for(all_ended, what="every occurrence ended")
        wait_for(lambda: job_row(engine, slow_id)["state"] == "RUNNING", what="slow running")
        with running_api(engine) as base, loopback.Client(base_url=base) as client:
            text = client.get("/metrics").text
        _promtool_accepts(text)
        s = samples(text)

        works = _ended(engine, "works")
        breaks = _ended(engine, "breaks")
        assert {state for state, _ in works} == {"SUCCEEDED"}
        assert {state for state, _ in breaks} == {"FAILED"}
        newest_success = max(at for _, at in works).timestamp()
        newest_failure = max(at for _, at in breaks).timestamp()
        last_success = "rota_schedule_last_success_timestamp_seconds"
        last_outcome = "rota_schedule_last_outcome_timestamp_seconds"
        assert value(s, last_success, schedule="works") == newest_success
        assert [x.labels for x in _named(s, last_success)] == [{"schedule": "works"}]
        assert value(s, last_outcome, schedule="works", state="SUCCEEDED") == newest_success
        assert value(s, last_outcome, schedule="breaks", state="FAILED") == newest_failure
        assert [x.labels["schedule"] for x in _named(s, last_outcome)] == ["breaks", "works"]
        # next fire: as stored, absent while paused
        with engine.connect() as conn:
            stored = dict(conn.execute(select(schedules.c.name, schedules.c.next_fire_at)).all())
        next_fire = "rota_schedule_next_fire_timestamp_seconds"
        assert value(s, next_fire, schedule="works") == stored["works"].timestamp()
        assert [x.labels["schedule"] for x in _named(s, next_fire)] == ["breaks", "works"]
        assert value(s, "rota_schedule_paused", schedule="resting") == 1
        assert value(s, "rota_schedule_paused", schedule="works") == 0
        assert value(s, "rota_schedule_set_aside", schedule="breaks") == 0
        # processes, long runs, handlers
        assert value(s, "rota_workers", kind="executor", pool="default") == 1
        assert value(s, "rota_workers", kind="scheduler", pool="") == 0
        assert value(s, "rota_oldest_running_age_seconds", pool="default") > 0
        assert value(s, "rota_handler_unavailable", job_type="health.broken") == 1
        assert value(s, "rota_handler_unavailable", job_type="health.ok") == 0

        # The same facts for the dashboard.
        with running_api(engine) as base, loopback.Client(base_url=base) as client:
            listed = {d["name"]: d for d in client.get("/schedules").json()["schedules"]}
            one = client.get("/schedules/breaks").json()
        assert listed["works"]["last_success"] is not None
        assert listed["works"]["last_outcome"]["state"] == "SUCCEEDED"
        assert (
            listed["resting"]["last_outcome"] is None and listed["resting"]["last_success"] is None
        )
        assert one["last_success"] is None
        assert one["last_outcome"]["state"] == "FAILED"
        assert one["last_outcome"]["instant"] == listed["breaks"]["last_outcome"]["instant"]
        assert one["last_outcome"]["finished_at"] is not None
        # ...and in `rota schedules`.
        assert main(["schedules", "--json", "--db", db_url]) == 0
        shown = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
        assert shown["breaks"]["last_outcome"]["state"] == "FAILED"
        assert shown["breaks"]["last_success"] is None
        assert shown["works"]["last_success"] == utc_key(
            datetime.fromtimestamp(newest_success, UTC)
        )
        assert main(["schedules", "--db", db_url]) == 0
        assert "    last outcome: FAILED for " in capsys.readouterr().out

        # A fixed handler path clears it at the executor's next refresh.
        fixed = FILE.format(broken="tests.handlers.plain:noop")
        apply_schedule_file(engine, load_schedule_text(fixed, "h.yaml"))
        ex.reload_job_types()
        assert ex.unrunnable_types() == set()
        wait_for(
            lambda: (
                value(_scrape(engine), "rota_handler_unavailable", job_type="health.broken") == 0
            ),
            what="the fixed handler no longer reported",
        )
    finally:
        ex.shutdown(drain_timeout=0)
    # Gone (deregistered): no live executor, nothing reported.
    s = _scrape(engine)
    assert value(s, "rota_workers", kind="executor", pool="default") == 0
    assert value(s, "rota_oldest_running_age_seconds", pool="default") == 0


def test_an_executor_that_is_gone_reports_nothing(engine: Engine) -> None:
    apply_schedule_file(engine, load_schedule_text(FILE.format(broken=BROKEN), "h.yaml"))
    ex = Executor(engine, concurrency=1, listen=False, metrics_interval=3600, liveness_interval=0.2)
    ex.start()
    try:
        s = _scrape(engine)
        assert value(s, "rota_handler_unavailable", job_type="health.broken") == 1
    finally:
        ex.shutdown(drain_timeout=0)
    s = _scrape(engine)
    assert value(s, "rota_handler_unavailable", job_type="health.broken") == 0


def test_schedule_names_are_quoted_as_the_text_format_wants() -> None:
    hostile = 'a"b\\c\nd é'
    text = schedule_text(
        [(hostile, 1, 1, "5", "FAILED", "1.5", None), ("plain", 0, 0, "7.25", None, None, "2")]
    )
    _promtool_accepts(text.decode())
    s = samples(text.decode())
    assert (
        value(s, "rota_schedule_last_outcome_timestamp_seconds", schedule=hostile, state="FAILED")
        == 1.5
    )
    assert value(s, "rota_schedule_paused", schedule=hostile) == 1
    assert value(s, "rota_schedule_set_aside", schedule=hostile) == 1
    assert value(s, "rota_schedule_next_fire_timestamp_seconds", schedule="plain") == 7.25
    assert [x.labels for x in _named(s, "rota_schedule_next_fire_timestamp_seconds")] == [
        {"schedule": "plain"}  # a paused schedule has no next fire
    ]
    assert value(s, "rota_schedule_last_success_timestamp_seconds", schedule="plain") == 2.0
