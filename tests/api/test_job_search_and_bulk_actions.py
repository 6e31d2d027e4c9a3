"""``GET /jobs?q=`` and the bulk forms ``POST /jobs/cancel`` / ``POST /jobs/replay``,
against a running server on both backends: what a search finds, what it refuses, and
that a bulk action is bounded, changes what it counted and leaves one audit row per job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine, select

from rota.api.bulk import DEFAULT_MAX
from rota.api.problems import PROBLEM_JSON
from rota.core.operator_notes import ActionNote
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.queries.jobs_read import JobFilter
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import operator_actions
from rota.operations.jobs import bulk_cancel
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import add_jobs, claim_as, job_type, states, store_types

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def api(engine: Engine) -> Iterator[httpx.Client]:
    store_types(engine, job_type("t"), job_type("other"))
    with running_api(engine) as base, loopback.Client(base_url=base, timeout=30) as client:
        yield client


def failed_with(engine: Engine, job_ids: list[uuid.UUID], code: str, detail: str) -> None:
    """Run one attempt of each job to FAILED through the real claim and outcome statements."""
    claimed = claim_as(engine, "w1", len(job_ids))
    assert {c.job_id for c in claimed} == set(job_ids)
    finishes = [
        Finish(c.job_id, c.lease_generation, JobState.FAILED, AttemptOutcome.FAILED, code, detail)
        for c in claimed
    ]
    with engine.begin() as conn:
        finish_if_lease_held(conn, owner="w1", finishes=finishes)


def found(api: httpx.Client, query: str) -> set[str]:
    r = api.get("/jobs", params={"q": query, "limit": 500})
    assert r.status_code == 200, r.text
    return {j["job_id"] for j in r.json()["jobs"]}


def test_q_finds_a_job_by_id_prefix_dedup_key_error_code_and_detail(
    api: httpx.Client, engine: Engine
) -> None:
    (broken,) = add_jobs(engine, job_type("other"))
    failed_with(engine, [broken], "UPSTREAM_TIMEOUT", "Traceback ...\nReadTimeout: s3.eu\n")
    keyed = [
        api.post("/jobs", json={"job_type": "t", "dedup_key": k}).json()["job_id"]
        for k in ("nightly@2026-12-01T02:00:00Z", "nightly@2026-12-02T02:00:00Z", "100%_done")
    ]
    plain = api.post("/jobs", json={"job_type": "t"}).json()["job_id"]

    assert found(api, plain[:8]) == {plain}  # an id prefix: a primary-key range
    assert found(api, plain) == {plain}
    assert found(api, plain.upper()) == {plain}
    assert found(api, "nightly@2026-12") == set(keyed[:2])
    assert found(api, "NIGHTLY@2026-12-02") == {keyed[1]}  # any case
    assert found(api, "upstream_time") == {str(broken)}
    assert found(api, "readtimeout: s3") == {str(broken)}
    # % and _ are characters, not wildcards.
    assert found(api, "100%_") == {keyed[2]}
    assert found(api, "1%0") == set()
    assert found(api, "nightly_2026") == set()
    # Combined with the other filters, and blank means no search.
    assert api.get("/jobs?q=nightly&job_type=other").json()["jobs"] == []
    assert found(api, "   ") == {*keyed, plain, str(broken)}


def test_q_pages_by_keyset_and_the_next_link_keeps_it(api: httpx.Client) -> None:
    made = [
        api.post("/jobs", json={"job_type": "t", "dedup_key": f"batch-{i}"}).json()["job_id"]
        for i in range(5)
    ]
    api.post("/jobs", json={"job_type": "t", "dedup_key": "unrelated"})
    seen: list[str] = []
    url: str | None = "/jobs?q=batch-&limit=2&since=1h"
    while url is not None:
        page = api.get(url).json()
        seen += [j["job_id"] for j in page["jobs"]]
        url = page["next"]
        if url is not None:
            assert "q=batch-" in url and "since=20" in url  # the instant, not the duration
    assert seen == made[::-1]


@pytest.mark.parametrize(
    "q",
    ["a\x00b", "\x00", "x" * 201, "y" * 20_000, "tab\there", "line\nbreak", "\x7f"],
    ids=["nul-inside", "nul", "201-chars", "20000-chars", "tab", "newline", "del"],
)
def test_a_hostile_q_is_a_clear_4xx(api: httpx.Client, q: str) -> None:
    r = api.get("/jobs", params={"q": q})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM_JSON
    detail = r.json()["detail"]
    # A NUL is refused for every parameter before any route runs; the rest by the q rule.
    assert detail.startswith("query parameter 'q': holds a NUL" if "\x00" in q else "q:"), detail
    body = api.post("/jobs/replay", json={"q": q, "dry_run": True})
    assert body.status_code in (413, 422), body.text  # 413: larger than a bulk body can be


@pytest.mark.parametrize("field", ["job_type", "schedule"])
def test_a_nul_in_a_name_filter_is_a_clear_4xx(api: httpx.Client, field: str) -> None:
    # PostgreSQL refuses a NUL in any text parameter: it was a 500 there.
    for r in (
        api.get("/jobs", params={field: "t\x00"}),
        api.post("/jobs/cancel", json={field: "t\x00"}),
        api.post("/jobs/replay", json={field: "\x00", "dry_run": True}),
    ):
        assert r.status_code == 422, r.text
        assert r.json()["detail"] in (
            f"{field}: only printable characters",  # in a JSON body
            f"query parameter '{field}': holds a NUL character",  # in the query string
        )


def test_bulk_replay_counts_then_replays_the_filtered_set_with_one_audit_row_each(
    api: httpx.Client, engine: Engine
) -> None:
    ids = add_jobs(engine, job_type("t"), 3)
    failed_with(engine, ids, "BOOM", "boom")
    (elsewhere,) = add_jobs(engine, job_type("other"))
    failed_with(engine, [elsewhere], "BOOM", "boom")
    ids += add_jobs(engine, job_type("t"))
    filters = {"state": "FAILED", "job_type": "t", "q": "boom"}

    r = api.post("/jobs/replay", json={**filters, "dry_run": True})
    assert r.status_code == 200, r.text
    assert r.json() == {"dry_run": True, "matching": 3, "max": DEFAULT_MAX, "over_max": False}
    assert set(states(engine).values()) == {"FAILED", "QUEUED"}  # nothing changed yet

    r = api.post("/jobs/replay", json={**filters, "reason": "upstream fixed"})
    assert r.status_code == 200, r.text
    assert r.json() == {"total": 3, "changed": {"QUEUED": 3}, "batches": 1}
    assert states(engine, [*ids, elsewhere]) == {
        **{i: "QUEUED" for i in ids},
        elsewhere: "FAILED",
    }
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                operator_actions.c.job_id,
                operator_actions.c.action,
                operator_actions.c.actor,
                operator_actions.c.reason,
            )
        ).all()
    assert sorted(rows) == sorted((i, "replay", "anonymous", "upstream fixed") for i in ids[:3])
    # The audit and the job page show them like any other action.
    actions = api.get(f"/jobs/{ids[0]}").json()["actions"]
    assert [(a["action"], a["reason"]) for a in actions] == [("replay", "upstream fixed")]


def test_bulk_cancel_goes_by_the_same_filters(api: httpx.Client, engine: Engine) -> None:
    waiting = add_jobs(engine, job_type("t"), 3)
    (other,) = add_jobs(engine, job_type("other"))
    r = api.post("/jobs/cancel", json={"job_type": "t", "reason": "drain"})
    assert r.status_code == 200, r.text
    assert r.json()["changed"] == {"CANCELLED": 3}
    assert states(engine) == {**{i: "CANCELLED" for i in waiting}, other: "QUEUED"}
    # Cancelling is for waiting and running jobs: asking for FAILED ones is bad input.
    r = api.post("/jobs/cancel", json={"state": "FAILED"})
    assert r.status_code == 422 and "cannot be cancelled" in r.json()["detail"]
    r = api.post("/jobs/replay", json={"state": "QUEUED"})
    assert r.status_code == 422 and "cannot be replayed" in r.json()["detail"]


@pytest.mark.parametrize("action", ["cancel", "replay"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_bulk_action_naming_a_type_or_schedule_that_exists_nowhere_is_refused(
    api: httpx.Client, engine: Engine, action: str, dry_run: bool
) -> None:
    """A typo must not look like "no jobs": as ``rota cancel --type``, 422 with the
    close names, and nothing done."""
    ids = add_jobs(engine, job_type("t"), 2)
    body = {"state": "QUEUED" if action == "cancel" else "FAILED", "dry_run": dry_run}
    r = api.post(f"/jobs/{action}", json={**body, "job_type": "tt"})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM_JSON
    assert r.json()["detail"] == "job_type: unknown job type 'tt'; did you mean 't'?"
    r = api.post(f"/jobs/{action}", json={**body, "schedule": "nightly\u00e9"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("schedule: unknown schedule 'nightly\u00e9'"), r.text
    assert "rota apply" in r.json()["detail"]  # no schedule exists yet: how to make one
    assert set(states(engine, ids).values()) == {"QUEUED"}
    with engine.connect() as conn:
        assert conn.execute(select(operator_actions)).first() is None


def test_bulk_refuses_more_jobs_than_max_and_changes_nothing(
    api: httpx.Client, engine: Engine
) -> None:
    ids = add_jobs(engine, job_type("t"), 5)
    r = api.post("/jobs/cancel", json={"job_type": "t", "max": 3, "dry_run": True})
    assert r.json() == {"dry_run": True, "matching": 4, "max": 3, "over_max": True}
    r = api.post("/jobs/cancel", json={"job_type": "t", "max": 3})
    assert r.status_code == 422, r.text
    problem = r.json()
    assert problem["matching"] == 4 and problem["max"] == 3  # counted no further than max + 1
    assert "nothing was done" in problem["detail"]
    assert set(states(engine, ids).values()) == {"QUEUED"}
    with engine.connect() as conn:
        assert conn.execute(select(operator_actions)).first() is None
    r = api.post("/jobs/cancel", json={"job_type": "t", "max": 5})
    assert r.status_code == 200 and r.json()["total"] == 5


def test_a_bulk_walk_stops_at_its_limit(engine: Engine) -> None:
    store_types(engine, job_type("t"))
    ids = add_jobs(engine, job_type("t"), 7)
    result = bulk_cancel(engine, JobFilter(job_types=("t",)), ActionNote.of("a"), batch=2, limit=3)
    assert result.total == 3 and result.batches == 2
    assert sorted(states(engine, ids).values()) == ["CANCELLED"] * 3 + ["QUEUED"] * 4


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"", 400, "not valid JSON"),
        (b"{not json", 400, "not valid JSON"),
        (b"[]", 422, ""),
        (b"{}", 422, "at least one filter"),
        (b'{"reason": "all of them"}', 422, "at least one filter"),
        (b'{"state": "", "q": "  "}', 422, "at least one filter"),
        (b'{"job_type": "t", "max": 0}', 422, "max"),
        (b'{"job_type": "t", "max": 1000001}', 422, "max"),
        (b'{"job_type": "t", "max": "5"}', 422, "max"),
        (b'{"job_type": "t", "dry_run": "yes"}', 422, "dry_run"),
        (b'{"job_type": "t", "limit": 5}', 422, "limit"),
        (b'{"job_type": "t", "reason": "a\\u0000b"}', 422, "reason"),
        (b'{"state": "DONE"}', 422, "state"),
        (b'{"since": "soon"}', 422, "since"),
        (b'{"since": "99999-01-01T00:00:00Z"}', 422, "since"),
        (b'{"job_type": "' + b"t" * 201 + b'"}', 422, "job_type"),
    ],
)
def test_a_bad_bulk_body_is_a_clear_4xx_and_changes_nothing(
    api: httpx.Client, engine: Engine, body: bytes, status: int, says: str
) -> None:
    ids = add_jobs(engine, job_type("t"), 2)
    for action in ("cancel", "replay"):
        r = api.post(f"/jobs/{action}", content=body, headers=JSON)
        assert r.status_code == status, (action, r.text)
        assert r.headers["content-type"] == PROBLEM_JSON
        assert says in r.text
    assert set(states(engine, ids).values()) == {"QUEUED"}
    big = b'{"job_type": "t", "reason": "' + b"x" * 20_000 + b'"}'
    r = api.post("/jobs/cancel", content=big, headers=JSON)
    assert r.status_code == 413
