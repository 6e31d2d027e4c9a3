"""``GET /audit``: every operator action, newest first, filtered and paged; hostile input is 4xx.

``since`` (an ISO instant or a duration back from the database clock) and
``actor`` filter; ``limit`` and the ``next`` link page through exactly once,
however many rows share an instant (a bulk action's rows do). Values no row
could match (a NUL, an overlong actor, an instant that overflows when
converted to UTC, a hand-made cursor) are 422 problem+json, never 500.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from rota.core.operator_notes import ActionNote
from rota.core.queries.jobs_read import JobFilter
from rota.operations.jobs import bulk_cancel
from rota.operations.schedules import pause, resume
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import add_jobs, job_type, store_types

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
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        running_api(engine, token=TOKEN) as base,
        loopback.Client(base_url=base, timeout=10, headers=headers) as client,
    ):
        yield client


@pytest.fixture
def history(engine: Engine) -> dict[str, list[str]]:
    """Three days ago carol paused and resumed; now alice cancels 7 jobs in one batch
    (one instant) and bob pauses. {actor: the targets, newest first}."""
    spec = job_type("t")
    store_types(engine, spec)
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    long_ago = datetime.now(UTC) - timedelta(days=3)
    carol = ActionNote.of("carol", "old news")
    pause(engine, "nightly", now=long_ago, note=carol)
    resume(engine, "nightly", now=long_ago + timedelta(seconds=1), note=carol)
    jobs = add_jobs(engine, spec, 7)
    bulk_cancel(engine, JobFilter(job_types=("t",)), ActionNote.of("alice", "drain"))
    pause(engine, "nightly", note=ActionNote.of("bob"))
    return {
        "bob": ["nightly"],
        "alice": sorted((str(j) for j in jobs), reverse=True),
        "carol": ["nightly", "nightly"],
    }


def targets(entries: list[dict[str, Any]]) -> list[str]:
    return [e["target"] for e in entries]


def test_newest_first_with_filters(api: httpx.Client, history: dict[str, list[str]]) -> None:
    everything = api.get("/audit").json()["actions"]
    assert [e["actor"] for e in everything] == ["bob"] + ["alice"] * 7 + ["carol"] * 2
    assert [e["action"] for e in everything[-2:]] == ["resume", "pause"]
    # A bulk action's rows share their instant; the newest row id comes first.
    alice = [e for e in everything if e["actor"] == "alice"]
    assert len({e["at"] for e in alice}) == 1

    assert targets(api.get("/audit", params={"actor": "carol"}).json()["actions"]) == [
        "nightly",
        "nightly",
    ]
    assert api.get("/audit", params={"actor": "nobody"}).json() == {"actions": [], "next": None}
    recent = api.get("/audit", params={"since": "1d"}).json()["actions"]
    assert [e["actor"] for e in recent] == ["bob"] + ["alice"] * 7
    two_days_ago = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    assert api.get("/audit", params={"since": two_days_ago}).json()["actions"] == recent
    both = api.get("/audit", params={"since": "4d", "actor": "carol"}).json()["actions"]
    assert [e["reason"] for e in both] == ["old news", "old news"]


def test_pages_cover_every_row_once_across_shared_instants(
    api: httpx.Client, history: dict[str, list[str]]
) -> None:
    everything = api.get("/audit").json()["actions"]
    seen: list[dict[str, Any]] = []
    page = api.get("/audit", params={"limit": 3})
    while True:
        body = page.json()
        assert len(body["actions"]) <= 3
        seen += body["actions"]
        if body["next"] is None:
            assert "Link" not in page.headers
            break
        assert page.headers["Link"] == f'<{body["next"]}>; rel="next"'
        page = api.get(body["next"])
    assert seen == everything
    # The filters travel with the link.
    first = api.get("/audit", params={"limit": 2, "actor": "alice", "since": "1h"}).json()
    second = api.get(first["next"]).json()["actions"]
    assert [e["actor"] for e in second] == ["alice", "alice"]
    assert not {e["target"] for e in first["actions"]} & {e["target"] for e in second}


def cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "params",
    [
        {"actor": "a\x00b"},
        {"actor": "x" * 201},
        {"since": "9999-12-31T23:59:59-05:00"},
        {"since": "0001-01-01T00:00:00+01:00"},
        {"since": "99999999999d"},
        {"since": "yesterday"},
        {"since": "2026-01-01\x00"},
        {"since": "1" * 5000},
        {"limit": "0"},
        {"limit": "100000"},
        {"limit": "1e3"},
        {"cursor": "!!!"},
        {"cursor": cursor(["2026-01-01T00:00:00+00:00"])},
        {"cursor": cursor(["2026-01-01T00:00:00", 1])},
        {"cursor": cursor(["9999-12-31T23:59:59-05:00", 1])},
        {"cursor": cursor(["2026-01-01T00:00:00+00:00", 10**30])},
        {"cursor": cursor(["2026-01-01T00:00:00+00:00", "1"])},
        {"cursor": cursor(["2026-01-01T00:00:00+00:00", True])},
        {"cursor": cursor([5, 1])},
        {"cursor": cursor({"at": 1})},
        {"cursor": base64.urlsafe_b64encode(b"\xff\xfe").decode()},
    ],
)
def test_hostile_parameters_are_422_problems(
    api: httpx.Client, history: dict[str, list[str]], params: dict[str, str]
) -> None:
    answer = api.get("/audit", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["title"] == "Invalid request"


def test_the_audit_needs_the_token(engine: Engine) -> None:
    with running_api(engine, token=TOKEN) as base:
        assert loopback.get(f"{base}/audit", timeout=10).status_code == 401
