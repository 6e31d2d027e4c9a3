"""Every operator action through the HTTP API takes the CLI's path: ``rota.operations``.

A cancel, replay, pause or resume made over HTTP leaves the same
``operator_actions`` row (naming the request's actor) and the same event line
as the CLI's, on both backends, against a running server.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine, select

from rota.core.tables import operator_actions
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import loopback
from tests.support.api_support import fail, running_api
from tests.support.executor_support import job_type, store_types

TOKEN = "s3cret-token"
SCHEDULES = """
job_types:
  report.generate:
    handler: tests.handlers.plain:noop
schedules:
  nightly:
    job_type: report.generate
    cron: "0 2 * * *"
"""


@pytest.fixture
def api(engine: Engine) -> Iterator[httpx.Client]:
    store_types(engine, job_type("t"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        running_api(engine, token=TOKEN) as base,
        loopback.Client(base_url=base, timeout=10, headers=headers) as client,
    ):
        yield client


def recorded(engine: Engine) -> list[tuple[str, str | None, str | None, str]]:
    t = operator_actions
    with engine.connect() as conn:
        rows = conn.execute(
            select(t.c.action, t.c.job_id, t.c.schedule_name, t.c.actor).order_by(t.c.action_id)
        ).all()
    return [(a, str(j) if j else None, s, actor) for a, j, s, actor in rows]


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, object]]]:
    return [
        (r.event, getattr(r, "fields", {}))
        for r in caplog.records
        if r.name in ("rota.operator", "rota.scheduler") and hasattr(r, "event")
    ]


def test_api_cancel_and_replay_record_the_action_and_log_the_event(
    api: httpx.Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota")
    waiting = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    assert api.post(f"/jobs/{waiting}/cancel").json()["state"] == "CANCELLED"
    failed = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    fail(engine, [uuid.UUID(failed)])
    assert api.post(f"/jobs/{failed}/replay").json()["state"] == "QUEUED"

    assert recorded(engine) == [
        ("cancel", waiting, None, "default"),
        ("replay", failed, None, "default"),
    ]
    got = events(caplog)
    assert ("job_cancelled", {"job_id": uuid.UUID(waiting), "state": "CANCELLED",
            "actor": "default", "reason": None}) in got  # fmt: skip
    assert ("job_replayed", {"job_id": uuid.UUID(failed), "state": "QUEUED",
            "actor": "default", "reason": None}) in got  # fmt: skip
    # A request that changes nothing records nothing: the action did not happen.
    assert api.post(f"/jobs/{waiting}/cancel").status_code == 200
    assert api.post(f"/jobs/{waiting}/replay").status_code == 409
    assert len(recorded(engine)) == 2


def test_api_pause_resume_and_trigger_name_the_actor(
    api: httpx.Client, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota")
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    assert api.post("/schedules/nightly/pause").json()["changed"] is True
    assert api.post("/schedules/nightly/resume").json()["changed"] is True
    assert api.post("/schedules/nightly/trigger").status_code == 202
    assert recorded(engine) == [
        ("pause", None, "nightly", "default"),
        ("resume", None, "nightly", "default"),
        ("trigger", None, "nightly", "default"),
    ]
    actors = {name: fields.get("actor") for name, fields in events(caplog)}
    assert actors["schedule_paused"] == "default"
    assert actors["schedule_resumed"] == "default"
    assert actors["occurrence_triggered"] == "default"


def test_without_a_token_the_actor_is_anonymous(engine: Engine) -> None:
    store_types(engine, job_type("t"))
    with running_api(engine) as base, loopback.Client(base_url=base, timeout=10) as client:
        job = client.post("/jobs", json={"job_type": "t"}).json()["job_id"]
        assert client.post(f"/jobs/{job}/cancel").status_code == 200
    assert recorded(engine) == [("cancel", job, None, "anonymous")]


def test_a_wrong_token_acts_on_nothing(api: httpx.Client, engine: Engine) -> None:
    job = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    wrong = {"Authorization": "Bearer not-the-token"}
    assert api.post(f"/jobs/{job}/cancel", headers=wrong).status_code == 401
    assert api.get(f"/jobs/{job}").json()["state"] == "QUEUED"
    assert recorded(engine) == []
