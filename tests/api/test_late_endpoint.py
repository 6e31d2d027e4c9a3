"""``GET /late``, ``last_late`` on the schedules, the counter in ``/metrics``, and ``rota late``.

Two schedules with a deadline miss three deadlines each (their jobs never
run); a real ``rota serve`` app answers over HTTP, the CLI reads the same rows.
Values no schedule could have (a NUL, an overlong name, an unknown schedule,
a bad ``since``) are 4xx problem+json or exit 2, never a 500 or a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from rota.cli.main import main
from rota.scheduler.deadlines import SETTLE
from rota.scheduler.service import SchedulerService
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.scheduler_helpers import MIN, T0, apply_specs, spec

TOKEN = "s3cret-token"
DEADLINE = timedelta(seconds=30)
KEYS = {"schedule", "instant", "deadline", "reason", "job_id", "detected_at", "finished_at"}


@pytest.fixture
def missed(engine: Engine) -> None:
    """Schedules ``a`` and ``b`` (deadline 30 s) and ``plain`` (none): three minutes, no runs."""
    apply_specs(engine, spec("a", deadline=DEADLINE), spec("b", deadline=DEADLINE), spec("plain"))
    service = SchedulerService(engine)
    for m in range(1, 4):
        service.run_once(T0 + m * MIN)
    assert len(service.check_deadlines(T0 + 3 * MIN + DEADLINE + SETTLE)) == 6
    service.metrics.take()  # the scheduler delay: not what is looked at here


@pytest.fixture
def api(engine: Engine, missed: None) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        running_api(engine, token=TOKEN) as base,
        loopback.Client(base_url=base, timeout=10, headers=headers) as client,
    ):
        yield client


def test_late_lists_newest_first_filtered_by_schedule_and_since(api: httpx.Client) -> None:
    everything = api.get("/late").json()["late"]
    assert len(everything) == 6
    assert all(set(item) == KEYS for item in everything)
    assert [i["instant"] for i in everything][::2] == [
        "2026-03-02T00:03:00.000000Z",
        "2026-03-02T00:02:00.000000Z",
        "2026-03-02T00:01:00.000000Z",
    ]
    first = everything[0]
    assert first["reason"] == "not_finished"
    assert first["deadline"] == "2026-03-02T00:03:30.000000Z"
    assert first["detected_at"] == "2026-03-02T00:03:31.000000Z"
    assert first["job_id"] is not None and first["finished_at"] is None

    of_a = api.get("/late", params={"schedule": "a"}).json()["late"]
    assert [i["schedule"] for i in of_a] == ["a"] * 3
    recent = api.get("/late", params={"schedule": "a", "since": "2026-03-02T00:02:00Z"})
    assert [i["instant"][11:19] for i in recent.json()["late"]] == ["00:03:00", "00:02:00"]
    assert len(api.get("/late", params={"limit": 2}).json()["late"]) == 2
    assert api.get("/late", params={"since": "1h"}).json()["late"] == []  # the clock is later


def test_every_schedule_carries_its_last_late(api: httpx.Client) -> None:
    listed = {s["name"]: s for s in api.get("/schedules").json()["schedules"]}
    assert listed["a"]["last_late"]["instant"] == "2026-03-02T00:03:00.000000Z"
    assert set(listed["a"]["last_late"]) == KEYS
    assert listed["plain"]["last_late"] is None
    one = api.get("/schedules/b").json()
    assert one["last_late"]["schedule"] == "b"
    assert one["last_late"]["reason"] == "not_finished"
    shown = {s["name"]: s for s in api.get("/dashboard/data").json()["schedules"]}
    assert shown["a"]["last_late"] == listed["a"]["last_late"]
    assert shown["plain"]["last_late"] is None


def test_the_counter_is_in_metrics(api: httpx.Client) -> None:
    scraped = [
        s
        for family in text_string_to_metric_families(api.get("/metrics").text)
        for s in family.samples
        if s.name == "rota_schedule_deadline_missed_total"
    ]
    assert {(tuple(sorted(s.labels.items())), s.value) for s in scraped} == {
        ((("reason", "not_finished"), ("schedule", "a")), 3.0),
        ((("reason", "not_finished"), ("schedule", "b")), 3.0),
    }


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"schedule": "nope"}, 404),
        ({"schedule": "a\x00b"}, 422),
        ({"schedule": "x" * 201}, 422),
        ({"since": "yesterday"}, 422),
        ({"since": "9999-12-31T23:59:59-05:00"}, 422),
        ({"limit": "0"}, 422),
        ({"limit": "many"}, 422),
    ],
)
def test_values_no_schedule_could_have_are_refused(
    api: httpx.Client, params: dict[str, str], status: int
) -> None:
    response = api.get("/late", params=params)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


def test_rota_late_and_rota_schedules_show_them(
    missed: None, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["late", "--json", "--db", db_url]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 6 and all(set(i) == KEYS for i in listed)
    assert main(["late", "--schedule", "b", "--since", "2026-03-02T00:03:00Z", "--db", db_url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "INSTANT",
        "SCHEDULE",
        "REASON",
        "DEADLINE",
        "DETECTED",
        "FINISHED",
        "JOB",
    ]
    assert table[1].split()[:4] == [
        "2026-03-02T00:03:00Z",
        "b",
        "not_finished",
        "2026-03-02T00:03:30Z",
    ]
    assert len(table) == 2
    assert main(["schedules", "--json", "--db", db_url]) == 0
    schedules = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert schedules["a"]["deadline"] == "30s"
    assert schedules["a"]["last_late"]["instant"] == "2026-03-02T00:03:00.000000Z"
    assert schedules["plain"]["last_late"] is None
    assert main(["schedules", "--db", db_url]) == 0
    assert "deadline: 30s  last late: 2026-03-02T00:03:00.000000Z (not_finished" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--schedule", "nope"], "unknown schedule"),
        (["--schedule", "a\x00"], "NUL"),
        (["--since", "yesterday"], "--since"),
        (["--limit", "0"], "--limit"),
    ],
)
def test_rota_late_refuses_bad_input_with_exit_2(
    missed: None,
    db_url: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert main(["late", *argv, "--db", db_url]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
