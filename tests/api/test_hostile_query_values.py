"""Hostile values in query strings and paths are a 4xx problem, never a 500.

NUL characters (PostgreSQL text cannot hold one), instants past year 9999
once moved to UTC, and page cursors made by hand, in every parameter of every
read route, through a running server on both backends.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine

from tests.support import loopback
from tests.support.api_support import running_api


def cursor(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


HOSTILE_CURSORS = [
    cursor(["9999-12-31T23:59:59-05:00", "00000000-0000-0000-0000-000000000000"]),
    cursor(["0001-01-01T00:00:00+05:00", "00000000-0000-0000-0000-000000000000"]),
    cursor([1, 2]),
    cursor([[], {}]),
    cursor(["2026-01-01T00:00:00+00:00", 10**400]),
    cursor(["2026-01-01T00:00:00+00:00", "00000000-0000-0000-0000-000000000000", 3]),
    cursor({"a": 1}),
    cursor("x"),
    cursor(["9999-12-31T23:59:59-05:00", 1]),
    cursor(["0001-01-01T00:00:00+05:00", 1]),
    cursor(["2026-01-01T00:00:00+00:00", -1]),
    cursor(["2026-01-01T00:00:00+00:00", 1.5]),
    cursor(["2026-01-01T00:00:00+00:00", True]),
    "%%%",
    "a" * 399,
]

OVERFLOWING = [
    "9999-12-31T23:59:59-05:00",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59.999999-23:59",
    "99999d",
    "999999999999999999999d",
]

NUL = "a\x00b"


@pytest.fixture
def api(engine: Engine) -> Iterator[httpx.Client]:
    with running_api(engine) as base, loopback.Client(base_url=base, timeout=30) as client:
        yield client


ACTIONS = ("pause", "resume", "trigger", "cancel", "replay")
NUL_PATHS = [
    f"/schedules/{NUL}",
    f"/schedules/x/{NUL}",
    f"/jobs/{NUL}",
    *(f"/schedules/{NUL}/{action}" for action in ACTIONS[:3]),
    *(f"/jobs/{NUL}/{action}" for action in ACTIONS[3:]),
]
NUL_QUERIES = (
    [("/jobs", {p: NUL}) for p in ("job_type", "schedule", "state", "since", "cursor", "limit")]
    + [("/audit", {p: NUL}) for p in ("actor", "since", "cursor", "limit")]
    + [("/jobs", {NUL: "x"})]
)

# Well-formed for the other route's cursor (an audit cursor ends in a number).
CURSORS = [("/jobs", cursor(["2026-01-01T00:00:00+00:00", 5]))] + [
    (route, value) for route in ("/jobs", "/audit") for value in HOSTILE_CURSORS
]


def test_a_nul_anywhere_in_a_path_or_a_query_is_422(api: httpx.Client) -> None:
    for path in NUL_PATHS:
        method = "POST" if path.rsplit("/", 1)[-1] in ACTIONS else "GET"
        r = api.request(method, path.replace("\x00", "%00"))
        assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert r.headers["content-type"] == "application/problem+json"
        assert "path: holds a NUL character" in r.json()["detail"]
    for route, params in NUL_QUERIES:
        r = api.get(route, params=params)
        assert r.status_code == 422, (route, params, r.status_code, r.text[:300])
        assert "holds a NUL character" in r.json()["detail"]


def test_an_overflowing_since_is_422(api: httpx.Client) -> None:
    for route in ("/jobs", "/audit"):
        for since in OVERFLOWING:
            r = api.get(route, params={"since": since})
            assert r.status_code == 422, (route, since, r.status_code, r.text[:300])
            assert "since" in r.json()["detail"]


def test_a_cursor_made_by_hand_is_422(api: httpx.Client) -> None:
    for route, value in CURSORS:
        r = api.get(route, params={"cursor": value})
        assert r.status_code == 422, (route, value, r.status_code, r.text[:300])
        assert "cursor" in r.json()["detail"]
