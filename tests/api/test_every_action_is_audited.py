"""Every operator action over HTTP is on record with the token's name and the body's reason.

``POST`` cancel, replay, pause, resume and trigger take an optional JSON body
``{"reason": "..."}``, checked as the command line's ``--reason`` is (a bad
one is 422 and changes nothing). The actions appear in ``GET /audit``, in
``rota audit``, and in the ``actions`` list of ``GET /jobs/{id}`` and
``GET /schedules/{name}``. Both backends, against a running server.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from rota.cli.main import main
from rota.core.tables import operator_actions
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import loopback
from tests.support.api_support import fail, running_api
from tests.support.executor_support import job_row, job_type, store_types

TOKEN = "s3cret-token"
SCHEDULES = """
job_types:
  t:
    handler: tests.handlers.plain:noop
schedules:
  nightly:
    job_type: t
    cron: "0 2 * * *"
"""


@pytest.fixture
def api(engine: Engine) -> Iterator[httpx.Client]:
    store_types(engine, job_type("t"))
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        running_api(engine, token=TOKEN) as base,
        loopback.Client(base_url=base, timeout=10, headers=headers) as client,
    ):
        yield client


def submit(api: httpx.Client) -> str:
    job_id: str = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    return job_id


def summary(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["action"], e["target_kind"], e["target"], e["actor"], e["reason"]) for e in entries]


def recorded(engine: Engine) -> int:
    with engine.connect() as conn:
        return len(conn.execute(select(operator_actions.c.action_id)).all())


def test_each_action_records_the_token_and_the_reason_everywhere_it_is_listed(
    api: httpx.Client, engine: Engine, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    waiting = submit(api)
    failed = submit(api)
    fail(engine, [uuid.UUID(failed)])
    answers = [
        api.post(f"/jobs/{waiting}/cancel", json={"reason": "not needed"}),
        api.post(f"/jobs/{failed}/replay", json={"reason": "fixed the bug"}),
        api.post("/schedules/nightly/pause", json={"reason": "upstream down"}),
        api.post("/schedules/nightly/resume", json={"reason": "upstream back"}),
        api.post("/schedules/nightly/trigger", json={"reason": "rerun by hand"}),
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 202]
    triggered = answers[-1].json()["job_id"]

    expected = [
        ("trigger", "schedule", "nightly", "default", "rerun by hand"),
        ("resume", "schedule", "nightly", "default", "upstream back"),
        ("pause", "schedule", "nightly", "default", "upstream down"),
        ("replay", "job", failed, "default", "fixed the bug"),
        ("cancel", "job", waiting, "default", "not needed"),
    ]
    body = api.get("/audit").json()
    assert summary(body["actions"]) == expected
    assert set(body["actions"][0]) >= {"at", "actor", "action", "target_kind", "target", "reason"}
    assert body["actions"][0]["detail"] == f"job {triggered}"
    assert job_row(engine, uuid.UUID(triggered))["schedule_name"] == "nightly"

    # The job's and the schedule's own lists, oldest first.
    assert summary(api.get(f"/jobs/{failed}").json()["actions"]) == [expected[3]]
    assert summary(api.get(f"/jobs/{waiting}").json()["actions"]) == [expected[4]]
    assert summary(api.get("/schedules/nightly").json()["actions"]) == expected[2::-1]
    assert api.get(f"/jobs/{triggered}").json()["actions"] == []

    # ... and on the command line.
    assert main(["audit", "--json", "--db", db_url]) == 0
    assert summary(json.loads(capsys.readouterr().out)) == expected
    assert main(["job", failed, "--db", db_url]) == 0
    assert "replay by default at " in capsys.readouterr().out


@pytest.mark.parametrize(
    "body",
    [None, b"", b"{}", b'{"reason": null}', b'{"reason": ""}', b'{"reason": "   "}'],
)
def test_no_body_or_no_reason_acts_without_a_reason(
    api: httpx.Client, engine: Engine, body: bytes | None
) -> None:
    job = submit(api)
    headers = {"Content-Type": "application/json"} if body else {}
    assert api.post(f"/jobs/{job}/cancel", content=body, headers=headers).status_code == 200
    assert api.post("/schedules/nightly/pause", content=body, headers=headers).status_code == 200
    got = summary(api.get("/audit").json()["actions"])
    assert got == [
        ("pause", "schedule", "nightly", "default", None),
        ("cancel", "job", job, "default", None),
    ]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"reason": "a\x00b"}, 422, "NUL"),
        ({"reason": "x" * 1001}, 422, "at most 1000 characters"),
        ({"reason": "clear\x1b[2Jscreen"}, 422, "control character (U+001B"),
        ({"reason": "two\nlines"}, 422, "control character (U+000A"),
        ({"reason": 5}, 422, "reason"),
        ({"reason": ["x"]}, 422, "reason"),
        ({"reason": "ok", "actor": "mallory"}, 422, "actor"),
        (["reason"], 422, "object"),
        ("reason", 422, "object"),
        (b"{not json", 400, "not valid JSON"),
        (b'{"reason": "' + b"x" * 70_000 + b'"}', 413, "at most"),
    ],
)
def test_a_reason_that_cannot_be_kept_is_refused_and_nothing_happens(
    api: httpx.Client, engine: Engine, body: Any, status: int, says: str
) -> None:
    job = submit(api)
    failed = submit(api)
    fail(engine, [uuid.UUID(failed)])
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    for path in (
        f"/jobs/{job}/cancel",
        f"/jobs/{failed}/replay",
        "/schedules/nightly/pause",
        "/schedules/nightly/resume",
        "/schedules/nightly/trigger",
    ):
        answer = api.post(path, content=raw, headers=headers)
        assert answer.status_code == status, (path, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        assert says in answer.json()["detail"], answer.json()
    assert job_row(engine, uuid.UUID(job))["state"] == "QUEUED"
    assert job_row(engine, uuid.UUID(failed))["state"] == "FAILED"
    assert api.get("/schedules/nightly").json()["paused"] is False
    assert recorded(engine) == 0
    assert api.get("/jobs", params={"schedule": "nightly"}).json()["jobs"] == []
