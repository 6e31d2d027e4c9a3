"""The HTTP API against a running server, with a real HTTP client, on both backends."""

from __future__ import annotations

import base64
import json
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from sqlalchemy import Engine, func, select

from rota.api.problems import PROBLEM_JSON
from rota.api.resources import instant
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import jobs
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import claim_as, job_type, store_types

SCHEDULES = """
job_types:
  report.generate:
    handler: tests.handlers.plain:noop
schedules:
  nightly:
    job_type: report.generate
    cron: "0 2 * * *"
  "odd/name with space":
    job_type: report.generate
    every: 1h
"""


@pytest.fixture
def api(engine: Engine) -> Iterator[httpx.Client]:
    store_types(engine, job_type("t"), job_type("other"))
    with running_api(engine) as base, loopback.Client(base_url=base, timeout=10) as client:
        yield client


def job_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(jobs)).scalar_one())


def finish(engine: Engine, job_id: uuid.UUID, state: JobState) -> None:
    """Run one attempt of ``job_id`` to ``state`` through the real claim and outcome statements."""
    (claimed,) = claim_as(engine, "w1", 1)
    assert claimed.job_id == job_id
    outcome = AttemptOutcome.SUCCEEDED if state is JobState.SUCCEEDED else AttemptOutcome.FAILED
    f = Finish(job_id, claimed.lease_generation, state, outcome, "BOOM", "<b>detail</b>")
    with engine.begin() as conn:
        finish_if_lease_held(conn, owner="w1", finishes=[f])


def test_submit_answers_202_with_location_and_the_job(api: httpx.Client, engine: Engine) -> None:
    r = api.post("/jobs", json={"job_type": "t", "args": {"n": 1}, "payload_ref": "s3://b/k"})
    assert r.status_code == 202
    location = r.headers["location"]
    assert location == f"/jobs/{r.json()['job_id']}"
    assert r.json()["state"] == "QUEUED" and r.json()["created"] is True
    job = api.get(location)
    assert job.status_code == 200
    body = job.json()
    assert body["args"] == {"n": 1} and body["payload_ref"] == "s3://b/k"
    assert body["attempts"] == [] and body["attempt_count"] == 0 and body["max_attempts"] == 5
    assert body["created_at"].endswith("Z") and body["error"] is None
    assert job_count(engine) == 1


def test_same_dedup_key_answers_the_existing_job(api: httpx.Client, engine: Engine) -> None:
    first = api.post("/jobs", json={"job_type": "t", "dedup_key": "order-42"})
    again = api.post("/jobs", json={"job_type": "t", "dedup_key": "order-42", "args": {"x": 2}})
    assert first.status_code == again.status_code == 202
    assert first.headers["location"] == again.headers["location"]
    assert again.json()["created"] is False
    assert job_count(engine) == 1


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"", 400, "not valid JSON"),
        (b"[1, 2]", 422, ""),
        (b'{"args": {}}', 422, "job_type"),
        (b'{"job_type": "t", "priority": "high"}', 422, "priority"),
        (b'{"job_type": "t", "surprise": 1}', 422, "surprise"),
        (b'{"job_type": "t", "args": [1]}', 422, "args"),
        (b'{"job_type": "t", "payload_ref": "a\\u0000b"}', 422, "NUL"),
        (b'{"job_type": "t", "dedup_key": "\\ud800"}', 422, "surrogate"),
        (b'{"job_type": "t", "dedup_key": "' + b"k" * 401 + b'"}', 422, "at most 400"),
        (b'{"job_type": "t", "run_after": "yesterday"}', 422, "run_after"),
        (b'{"job_type": "t", "args": {"x": NaN}}', 422, "JSON"),
        (b'{"job_type": "t", "max_attempts": 0}', 422, "max_attempts"),
        (b'{"job_type": "nope"}', 422, "unknown job type"),
        (b'{"job_type": "t", "args": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400, "JSON"),
    ],
)
def test_bad_submissions_are_problems_and_leave_no_job(
    api: httpx.Client, engine: Engine, body: bytes, status: int, fragment: str
) -> None:
    r = api.post("/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM_JSON
    problem = r.json()
    assert problem["status"] == status and problem["title"] and problem["type"]
    assert fragment in problem.get("detail", "") + str(problem.get("errors", ""))
    assert job_count(engine) == 0


def test_a_body_typed_other_than_json_is_refused(api: httpx.Client, engine: Engine) -> None:
    """A text/plain body is what a page on another origin can send: 415, and no job
    (tests/api/test_other_origins_change_nothing.py has the rest)."""
    r = api.post("/jobs", content=b'{"job_type": "t"}', headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.headers["content-type"] == PROBLEM_JSON
    assert job_count(engine) == 0


def test_unknown_and_malformed_ids_are_404(api: httpx.Client) -> None:
    for path in (f"/jobs/{uuid.uuid4()}", "/jobs/not-a-uuid", "/schedules/nope", "/nowhere"):
        r = api.get(path)
        assert r.status_code == 404, path
        assert r.headers["content-type"] == PROBLEM_JSON
    for action in ("cancel", "replay"):
        assert api.post(f"/jobs/{uuid.uuid4()}/{action}").status_code == 404


def test_list_filters_and_keyset_pages(api: httpx.Client, engine: Engine) -> None:
    made = [api.post("/jobs", json={"job_type": "t"}).json()["job_id"] for _ in range(7)]
    other = api.post("/jobs", json={"job_type": "other"}).json()["job_id"]
    seen: list[str] = []
    url: str | None = "/jobs?job_type=t&limit=3"
    pages = 0
    while url is not None:
        r = api.get(url)
        assert r.status_code == 200
        page = r.json()
        seen += [j["job_id"] for j in page["jobs"]]
        url = page["next"]
        if url is not None:
            assert r.headers["link"] == f'<{url}>; rel="next"'
        pages += 1
    assert pages == 3
    assert sorted(seen) == sorted(made) and len(seen) == len(set(seen))
    texts = [api.get(f"/jobs/{j}").json()["created_at"] for j in seen]
    created = [datetime.fromisoformat(t) for t in texts]
    assert created == sorted(created, reverse=True)
    assert texts == sorted(texts, reverse=True)  # one width: the text sorts as the instant
    api.post(f"/jobs/{made[0]}/cancel")
    cancelled = api.get("/jobs?state=CANCELLED").json()["jobs"]
    assert [j["job_id"] for j in cancelled] == [made[0]]
    both = api.get("/jobs?state=cancelled,queued&limit=100").json()["jobs"]
    assert len(both) == 8
    assert api.get("/jobs?since=1h").json()["jobs"][0]["job_id"] == other
    assert api.get("/jobs?since=2999-01-01T00:00:00Z").json()["jobs"] == []
    assert api.get("/jobs?state=DONE").status_code == 422
    assert api.get("/jobs?since=soon").status_code == 422
    assert api.get("/jobs?cursor=garbage").status_code == 422
    naive = base64.urlsafe_b64encode(json.dumps(["2026-01-01T00:00:00", made[0]]).encode())
    assert api.get(f"/jobs?cursor={naive.decode().rstrip('=')}").status_code == 422
    assert api.get("/jobs?limit=0").status_code == 422


def test_cancel_waiting_running_and_finished_jobs(api: httpx.Client, engine: Engine) -> None:
    waiting = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    r = api.post(f"/jobs/{waiting}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "CANCELLED"
    assert api.post(f"/jobs/{waiting}/cancel").status_code == 200  # already what was asked

    running = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    claim_as(engine, "w1", 1)
    r = api.post(f"/jobs/{running}/cancel")
    assert r.status_code == 202 and r.json()["state"] == "CANCEL_REQUESTED"
    assert r.json()["lease"]["owner"] == "w1"

    done = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    finish(engine, uuid.UUID(done), JobState.SUCCEEDED)
    r = api.post(f"/jobs/{done}/cancel")
    assert r.status_code == 409 and r.json()["state"] == "SUCCEEDED"
    assert r.headers["content-type"] == PROBLEM_JSON


def test_replay_moves_failed_back_and_refuses_anything_else(
    api: httpx.Client, engine: Engine
) -> None:
    failed = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    finish(engine, uuid.UUID(failed), JobState.FAILED)
    done = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    finish(engine, uuid.UUID(done), JobState.SUCCEEDED)
    body = api.get(f"/jobs/{failed}").json()
    assert body["state"] == "FAILED"
    assert body["error"] == {"code": "BOOM", "detail": "<b>detail</b>"}
    assert body["links"]["replay"] == f"/jobs/{failed}/replay"
    assert [a["outcome"] for a in body["attempts"]] == ["FAILED"]
    r = api.post(f"/jobs/{failed}/replay")
    assert r.status_code == 200 and r.json()["state"] == "QUEUED"
    assert r.json()["attempt_count"] == 0
    assert len(api.get(f"/jobs/{failed}").json()["attempts"]) == 1  # history kept
    r = api.post(f"/jobs/{done}/replay")
    assert r.status_code == 409 and "only a FAILED job" in r.json()["detail"]
    assert api.get(f"/jobs/{done}").json()["state"] == "SUCCEEDED"


def test_running_job_shows_progress_and_heartbeat_age(api: httpx.Client, engine: Engine) -> None:
    from rota.core.claimed import Renewal
    from rota.core.queries.jobs_lease import renew_leases_if_held

    job_id = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]
    (c,) = claim_as(engine, "w1", 1)
    with engine.begin() as conn:
        renewal = Renewal(c.job_id, c.lease_generation, "GENERATING", 340, 1000)
        renew_leases_if_held(conn, owner="w1", renewals=[renewal])
    body = api.get(f"/jobs/{job_id}").json()
    assert body["state"] == "RUNNING"
    assert body["progress"] == {"stage": "GENERATING", "done": 340, "total": 1000}
    assert body["lease"]["last_heartbeat_age_seconds"] >= 0
    assert body["lease"]["expired"] is False
    assert [a["outcome"] for a in body["attempts"]] == [None]


def test_schedules_read_pause_resume_trigger(api: httpx.Client, engine: Engine) -> None:
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    listing = api.get("/schedules").json()["schedules"]
    assert [s["name"] for s in listing] == ["nightly", "odd/name with space"]
    nightly = api.get("/schedules/nightly").json()
    assert nightly["rule"] == "cron 0 2 * * *" and nightly["skip_ledger"] == []
    assert nightly["next_fire_at"].endswith("T02:00:00.000000Z")

    r = api.post("/schedules/nightly/pause")
    assert r.status_code == 200 and r.json()["changed"] is True
    assert r.json()["schedule"]["paused"] is True
    assert api.post("/schedules/nightly/pause").json()["changed"] is False
    r = api.post("/schedules/nightly/resume")
    assert r.status_code == 200 and r.json()["changed"] is True
    assert r.json()["schedule"]["paused"] is False

    odd = "/schedules/odd%2Fname%20with%20space"
    assert api.get(odd).json()["name"] == "odd/name with space"
    r = api.post(f"{odd}/trigger")
    assert r.status_code == 202
    job = api.get(r.headers["location"]).json()
    assert job["schedule"] == "odd/name with space" and job["state"] == "QUEUED"
    assert job["dedup_key"].startswith("odd/name with space@manual:")
    assert api.get(odd).json()["last_job_id"] == job["job_id"]
    for action in ("pause", "resume", "trigger"):
        assert api.post(f"/schedules/nope/{action}").status_code == 404


def test_schedule_shows_its_skip_ledger(api: httpx.Client, engine: Engine) -> None:
    from rota.core.queries.jobs_read import database_now
    from rota.core.queries.schedule_skips import SkipRecord, record_skips
    from rota.core.states import SkipReason

    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    with engine.begin() as conn:
        now = database_now(conn)
        record_skips(
            conn, [SkipRecord("nightly", SkipReason.MISFIRE, now - timedelta(days=2), now, 2)]
        )
    body = api.get("/schedules/nightly").json()
    assert body["skipped_by_reason"] == {"misfire": 2}
    (entry,) = body["skip_ledger"]
    assert entry["reason"] == "misfire" and entry["count"] == 2


def test_openapi_document_describes_the_api(api: httpx.Client) -> None:
    doc = api.get("/openapi.json").json()
    assert {"/jobs", "/jobs/{job_id}", "/jobs/{job_id}/cancel", "/jobs/{job_id}/replay"} <= set(
        doc["paths"]
    )
    post = doc["paths"]["/jobs"]["post"]
    assert "202" in post["responses"] and "429" in post["responses"]
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert "job_type" in schema["properties"]


def test_health_and_readiness(api: httpx.Client) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    assert api.get("/readyz").json() == {"status": "ready"}


def test_readyz_is_503_on_an_unmigrated_database(empty_db_url: str) -> None:
    from rota.core.database import make_engine

    engine = make_engine(empty_db_url)
    try:
        with running_api(engine) as base:
            assert loopback.get(f"{base}/healthz").status_code == 200
            r = loopback.get(f"{base}/readyz")
            assert r.status_code == 503
            assert r.headers["content-type"] == PROBLEM_JSON
            assert "rota migrate" in r.json()["detail"]
    finally:
        engine.dispose()


def test_readyz_is_503_while_the_statements_functions_are_missing(fresh_pg_url: str) -> None:
    """A PostgreSQL database at the newest revision without this release's functions
    (a release whose statements changed, not migrated yet) is not ready: the
    executors would refuse it."""
    from sqlalchemy import text

    from rota.core.database import make_engine
    from rota.core.queries.jobs_outcome import SUCCEED

    engine = make_engine(fresh_pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"DROP FUNCTION {SUCCEED.name}"))
        with running_api(engine) as base:
            r = loopback.get(f"{base}/readyz")
            assert r.status_code == 503
            assert SUCCEED.name in r.json()["detail"]
            assert "rota migrate" in r.json()["detail"]
    finally:
        engine.dispose()


def test_an_unreachable_database_is_503_without_the_password() -> None:
    from rota.core.database import make_engine

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = make_engine(f"postgresql+psycopg://rota:hunter2@127.0.0.1:{port}/rota")
    try:
        with running_api(engine) as base, loopback.Client(base_url=base) as client:
            assert client.get("/healthz").status_code == 200
            for path in ("/readyz", "/jobs", "/metrics", "/dashboard/data"):
                r = client.get(path)
                assert r.status_code == 503, (path, r.text)
                assert r.headers["content-type"] == PROBLEM_JSON
                assert "hunter2" not in r.text
            r = client.post("/jobs", json={"job_type": "t"})
            assert r.status_code == 503 and "hunter2" not in r.text
    finally:
        engine.dispose()


def test_token_is_required_everywhere_but_the_probes(engine: Engine) -> None:
    store_types(engine, job_type("t"))
    token = "s3cret-token"
    with running_api(engine, token=token) as base, loopback.Client(base_url=base) as client:
        for method, path in (
            ("GET", "/jobs"),
            ("POST", "/jobs"),
            ("GET", f"/jobs/{uuid.uuid4()}"),
            ("GET", "/schedules"),
            ("GET", "/metrics"),
            ("GET", "/openapi.json"),
            ("GET", "/dashboard/data"),
            ("GET", "/"),
            ("GET", "/nowhere"),
        ):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                r = client.request(method, path, headers=headers)
                assert r.status_code == 401, (method, path, headers)
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert token not in r.text
        good = {"Authorization": f"Bearer {token}"}
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        assert client.get("/jobs", headers=good).status_code == 200
        assert client.get("/metrics", headers=good).status_code == 200
        lower = {"authorization": f"bearer {token}"}
        r = client.post("/jobs", json={"job_type": "t"}, headers=lower)
        assert r.status_code == 202
        # A browser gets the page that asks for the token, still with 401 and no data.
        page = client.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 401 and 'id="login"' in page.text


def test_quantiles_interpolate_within_buckets() -> None:
    from rota.api.dashboard import quantile

    buckets = {"0.1": 50.0, "0.25": 50.0, "+Inf": 0.0}
    assert quantile(0.5, buckets) == pytest.approx(0.1)
    assert quantile(0.95, buckets) == pytest.approx(0.1 + 0.15 * 45 / 50)
    assert quantile(0.5, {"0.005": 0.0, "+Inf": 4.0}) == pytest.approx(0.005)
    assert quantile(0.99, {}) is None


def test_instants_have_one_form_whole_seconds_included() -> None:
    """Every instant is UTC with six fractional digits: a whole second keeps its zeros,
    so instants compare as text the way they compare as times (a client sorts them)."""
    whole = datetime(2026, 12, 1, 23, 0, 3, tzinfo=UTC)
    later = whole + timedelta(microseconds=239_000)
    assert instant(whole) == "2026-12-01T23:00:03.000000Z"
    assert instant(later) == "2026-12-01T23:00:03.239000Z"
    texts = [instant(later), instant(whole)]
    assert sorted(t for t in texts if t is not None) == texts[::-1]
    east = whole.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert instant(east) == "2026-12-01T23:00:03.000000Z"  # an aware value in any zone
    assert instant(None) is None


def test_every_schedule_name_the_file_accepts_works_at_the_urls_the_api_builds(
    api: httpx.Client, engine: Engine
) -> None:
    """httpx resolves dot segments as a browser does: only `.` and `..` (refused by
    the loader) could not be carried; every other odd name round-trips."""
    odd = ["...", ".a", "a.", "a/..", "../a", "./a", "%2e", "a?b", "a#b", "%", "x/pause", "a//b"]
    body = "".join(f"  {json.dumps(n)}: {{job_type: report.generate, every: 1h}}\n" for n in odd)
    text = "job_types:\n  report.generate: {handler: tests.handlers.plain:noop}\nschedules:\n"
    apply_schedule_file(engine, load_schedule_text(text + body, "s.yaml"))
    for s in api.get("/schedules").json()["schedules"]:
        one = api.get(s["links"]["self"])
        assert one.status_code == 200 and one.json()["name"] == s["name"], s["name"]
        paused = api.post(s["links"]["pause"])
        assert paused.status_code == 200 and paused.json()["schedule"]["name"] == s["name"]
    assert sorted(s["name"] for s in api.get("/schedules").json()["schedules"]) == sorted(odd)


@pytest.mark.parametrize("run_after", ["2026-03-01T10:00:00", "2026-03-01", "2026-03-01T10:00"])
def test_a_run_after_without_a_time_zone_is_refused_as_python_enqueue_refuses_it(
    api: httpx.Client, engine: Engine, run_after: str
) -> None:
    r = api.post("/jobs", json={"job_type": "t", "run_after": run_after})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM_JSON
    problem = r.json()
    assert problem["detail"].startswith("run_after: ") and "time zone" in problem["detail"]
    assert problem["errors"] == [
        {"where": "body.run_after", "problem": problem["detail"].removeprefix("run_after: ")}
    ]
    assert job_count(engine) == 0


@pytest.mark.parametrize(
    ("run_after", "stored"),
    [
        ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00.000000Z"),
        ("2026-03-01T10:00:00+02:00", "2026-03-01T08:00:00.000000Z"),
    ],
)
def test_a_run_after_with_a_time_zone_is_kept(
    api: httpx.Client, run_after: str, stored: str
) -> None:
    r = api.post("/jobs", json={"job_type": "t", "run_after": run_after})
    assert r.status_code == 202, r.text
    assert r.json()["run_after"] == stored
