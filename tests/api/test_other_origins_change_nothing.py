"""A page on another origin changes nothing, with or without a token: real attacks from a
real page in headless Chromium (form POSTs, a ``no-cors`` fetch, ``sendBeacon``), then
the same requests forged header by header with httpx.

The attacker's page is served by a second HTTP server on another port: as
``localhost:<port>`` it is cross-site to rota on 127.0.0.1, as ``127.0.0.1:<port>``
same-site but another origin. Both are refused.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser
from sqlalchemy import Engine, func, select

from rota.api.problems import PROBLEM_JSON
from rota.core.queries.job_types import load_job_types
from rota.core.queries.schedules import get_schedule, pause_if_active
from rota.core.tables import jobs, operator_actions
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.api.surface import other_origin, recorded_api
from tests.support import loopback
from tests.support.api_support import fail, running_api
from tests.support.executor_support import add_jobs, job_row, wait_for

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


def prepared(engine: Engine) -> tuple[uuid.UUID, uuid.UUID]:
    """Schedule ``nightly`` paused, one QUEUED job and one FAILED job of type ``t``."""
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    with engine.begin() as conn:
        assert pause_if_active(conn, "nightly")
        spec = load_job_types(conn)["t"]
    queued, failed = add_jobs(engine, spec, 2)
    fail(engine, [failed])
    return queued, failed


def snapshot(engine: Engine) -> tuple[int, int, bool]:
    """(jobs, operator actions, nightly paused): what an attack would change."""
    with engine.connect() as conn:
        n_jobs = conn.execute(select(func.count()).select_from(jobs)).scalar_one()
        n_actions = conn.execute(select(func.count()).select_from(operator_actions)).scalar_one()
        row = get_schedule(conn, "nightly")
    assert row is not None
    return int(n_jobs), int(n_actions), bool(row["paused"])


def attack_page(target: str, queued: uuid.UUID, failed: uuid.UUID) -> str:
    """Every way a page can send a request that needs no permission from ``target``."""
    return f"""<!doctype html>
<html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<form id="resume" method="POST" action="{target}/schedules/nightly/resume" target="sink1">
  <input name="reason" value="csrf"></form>
<form id="submit" method="POST" enctype="text/plain" action="{target}/jobs" target="sink2">
  <input name='{{"job_type": "t", "tenant": "' value='x"}}'></form>
<form id="cancel" method="POST" action="{target}/jobs/{queued}/cancel" target="sink3"></form>
<script>
  window.sent = [];
  for (const id of ["resume", "submit", "cancel"]) document.getElementById(id).submit();
  fetch("{target}/jobs", {{method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: '{{"job_type": "t"}}'}})
    .then(() => window.sent.push("fetch"), () => window.sent.push("fetch failed"));
  fetch("{target}/schedules/nightly/pause", {{method: "POST", mode: "no-cors"}})
    .then(() => window.sent.push("bare fetch"), () => window.sent.push("bare fetch failed"));
  window.sent.push(navigator.sendBeacon("{target}/schedules/nightly/trigger",
    '{{"reason": "csrf"}}') ? "beacon" : "beacon refused");
  window.sent.push(navigator.sendBeacon("{target}/jobs/{failed}/replay")
    ? "empty beacon" : "empty beacon refused");
  window.sent.push(navigator.sendBeacon("{target}/jobs",
    new Blob(['{{"job_type": "t"}}'])) ? "blob beacon" : "blob beacon refused");
</script>
</body></html>"""


ATTACKS = {
    "/schedules/nightly/resume",
    "/jobs",
    "/schedules/nightly/pause",
    "/schedules/nightly/trigger",
}


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
@pytest.mark.parametrize("attacker", ["localhost", "127.0.0.1"], ids=["cross-site", "same-site"])
def test_a_page_on_another_origin_changes_nothing(
    engine: Engine, browser: Browser, token: str | None, attacker: str
) -> None:
    queued, failed = prepared(engine)
    before = snapshot(engine)
    with recorded_api(engine, token=token) as (base, answers):
        with other_origin(attack_page(base, queued, failed)) as port:
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"http://{attacker}:{port}/")
            expected = ATTACKS | {f"/jobs/{queued}/cancel", f"/jobs/{failed}/replay"}
            wait_for(
                lambda: expected <= {path for path, _ in answers.of("POST")},
                timeout=15,
                what=f"every attack to reach rota (seen: {answers.seen})",
            )
            wait_for(lambda: len(page.evaluate("window.sent")) >= 5, timeout=10, what="sent")
            context.close()
        posts = answers.of("POST")
        # Each attack reached rota and was refused as coming from another origin.
        assert posts and {status for _, status in posts} == {403}, posts
    assert snapshot(engine) == before
    assert job_row(engine, queued)["state"] == "QUEUED"
    assert job_row(engine, failed)["state"] == "FAILED"


# -- the same, forged with httpx ---------------------------------------------------------


@pytest.fixture
def target(engine: Engine) -> Iterator[tuple[httpx.Client, uuid.UUID]]:
    queued, _ = prepared(engine)
    with running_api(engine) as base, loopback.Client(base_url=base, timeout=10) as client:
        yield client, queued


def refused(r: httpx.Response, status: int, fragment: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM_JSON
    body = r.json()
    assert body["status"] == status and fragment in body["detail"], body


def test_a_foreign_origin_is_refused_on_every_change(
    engine: Engine, target: tuple[httpx.Client, uuid.UUID]
) -> None:
    client, queued = target
    before = snapshot(engine)
    own = str(client.base_url).rstrip("/")
    other_port = own.rsplit(":", 1)[1] + "1"
    for origin in (
        "http://evil.example",
        "null",
        f"http://127.0.0.1:{other_port}",
        f"http://localhost:{own.rsplit(':', 1)[1]}",  # the same port, another host name
        own + ".evil.example",
    ):
        for method, path in (
            ("POST", "/jobs"),
            ("POST", f"/jobs/{queued}/cancel"),
            ("POST", "/jobs/cancel"),  # the bulk form: {"job_type": "t"} would cancel it
            ("POST", "/jobs/replay"),
            ("POST", "/schedules/nightly/resume"),
            ("POST", "/schedules/nightly/trigger"),
            ("DELETE", f"/jobs/{queued}"),
            ("PUT", "/jobs"),
            ("PATCH", "/schedules/nightly"),
        ):
            r = client.request(
                method,
                path,
                json={"job_type": "t"},
                headers={"Origin": origin, "X-Rota-Request": "1"},
            )
            refused(r, 403, "origin")
    assert snapshot(engine) == before


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_sec_fetch_site_from_another_site_is_refused(
    engine: Engine, target: tuple[httpx.Client, uuid.UUID], site: str
) -> None:
    client, queued = target
    before = snapshot(engine)
    for path in ("/jobs", f"/jobs/{queued}/cancel", "/schedules/nightly/resume"):
        headers = {"Sec-Fetch-Site": site, "X-Rota-Request": "1"}
        r = client.post(path, json={"job_type": "t"}, headers=headers)
        refused(r, 403, site)
    assert snapshot(engine) == before


def test_changes_need_a_json_body(engine: Engine, target: tuple[httpx.Client, uuid.UUID]) -> None:
    client, _ = target
    before = snapshot(engine)
    body = json.dumps({"job_type": "t"}).encode()
    for content_type in (
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
    ):
        r = client.post("/jobs", content=body, headers={"Content-Type": content_type})
        refused(r, 415, "application/json")
    r = client.post("/jobs", content=body)  # a body that says nothing of its type
    refused(r, 415, "application/json")
    r = client.post("/schedules/nightly/resume", data={"reason": "x"})
    refused(r, 415, "application/json")
    assert snapshot(engine) == before


def test_the_page_s_own_requests_carry_the_rota_header(
    engine: Engine, target: tuple[httpx.Client, uuid.UUID]
) -> None:
    """A browser request (it carries Origin or Sec-Fetch-*) changes something only with
    ``X-Rota-Request: 1``, which no other origin can send without a CORS permission."""
    client, _ = target
    own = str(client.base_url).rstrip("/")
    before = snapshot(engine)
    for browser_headers in (
        {"Origin": own},
        {"Sec-Fetch-Site": "same-origin"},
        {"Origin": own, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"},
    ):
        r = client.post("/jobs", json={"job_type": "t"}, headers=browser_headers)
        refused(r, 403, "X-Rota-Request")
    assert snapshot(engine) == before
    page_like = {"Origin": own, "Sec-Fetch-Site": "same-origin", "X-Rota-Request": "1"}
    assert client.post("/jobs", json={"job_type": "t"}, headers=page_like).status_code == 202
    typed = {"Sec-Fetch-Site": "none", "X-Rota-Request": "1"}  # a user's own navigation
    assert client.post("/jobs", json={"job_type": "t"}, headers=typed).status_code == 202


def test_clients_without_a_browser_are_unchanged(
    engine: Engine, target: tuple[httpx.Client, uuid.UUID]
) -> None:
    """curl, httpx and scripts send no Origin: JSON bodies and empty bodies work as before."""
    client, queued = target
    assert client.post("/jobs", json={"job_type": "t"}).status_code == 202
    typed = {"Content-Type": "application/json; charset=utf-8"}
    r = client.post("/jobs", content=b'{"job_type": "t"}', headers=typed)
    assert r.status_code == 202
    assert client.post("/schedules/nightly/resume").status_code == 200  # curl -X POST
    assert client.post(f"/jobs/{queued}/cancel").status_code == 200


def test_a_token_does_not_make_another_origin_welcome(engine: Engine) -> None:
    queued, _ = prepared(engine)
    before = snapshot(engine)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with (
        running_api(engine, token=TOKEN) as base,
        loopback.Client(base_url=base, timeout=10, headers=auth) as client,
    ):
        for headers in (
            {"Origin": "http://evil.example", "X-Rota-Request": "1"},
            {"Sec-Fetch-Site": "cross-site", "X-Rota-Request": "1"},
        ):
            r = client.post(f"/jobs/{queued}/cancel", json={}, headers=headers)
            assert r.status_code == 403, r.text
            assert r.headers["content-type"] == PROBLEM_JSON
        plain = {"Content-Type": "text/plain"}
        r = client.post("/jobs", content=b'{"job_type": "t"}', headers=plain)
        assert r.status_code == 415
        assert snapshot(engine) == before
        assert client.post(f"/jobs/{queued}/cancel", json={}).status_code == 200


def test_reads_from_another_origin_get_no_cors_permission(
    target: tuple[httpx.Client, uuid.UUID],
) -> None:
    client, _ = target
    r = client.get("/jobs", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200
    assert "access-control-allow-origin" not in r.headers
    pre = client.options(
        "/jobs",
        headers={
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-rota-request",
        },
    )
    assert "access-control-allow-origin" not in pre.headers
    assert "access-control-allow-headers" not in pre.headers
