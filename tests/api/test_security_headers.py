"""Every HTML answer, the 401 page included, carries one Content-Security-Policy (with
``frame-ancestors 'none'``), ``X-Frame-Options: DENY``, ``nosniff`` and
``Referrer-Policy: no-referrer``; every answer carries ``nosniff``. A page on another
origin cannot frame the dashboard, with or without a token.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Browser
from sqlalchemy import Engine

from tests.api.surface import other_origin
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import job_type, store_types, wait_for

TOKEN = "s3cret-token"
PAGE_HEADERS = ("content-security-policy", "x-frame-options", "referrer-policy")


def assert_page_headers(r: httpx.Response, csp: str) -> None:
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == csp
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_the_401_page_carries_the_page_s_security_headers(engine: Engine) -> None:
    html = {"Accept": "text/html"}
    with running_api(engine) as base:
        open_page = loopback.get(f"{base}/", headers=html)
    assert open_page.status_code == 200
    csp = open_page.headers["content-security-policy"]
    assert_page_headers(open_page, csp)
    with running_api(engine, token=TOKEN) as base:
        asked = loopback.get(f"{base}/", headers=html)
        assert asked.status_code == 401 and 'id="login"' in asked.text
        assert_page_headers(asked, csp)
        shown = loopback.get(f"{base}/", headers={**html, "Authorization": f"Bearer {TOKEN}"})
        assert shown.status_code == 200
        assert_page_headers(shown, csp)


def test_every_answer_says_nosniff(engine: Engine) -> None:
    store_types(engine, job_type("t"))
    for token in (None, TOKEN):
        auth = {"Authorization": f"Bearer {TOKEN}"} if token else {}
        with running_api(engine, token=token) as base, loopback.Client(base_url=base) as c:
            answers = [
                c.get("/healthz"),
                c.get("/readyz"),
                c.get("/jobs", headers=auth),
                c.get("/jobs"),  # 401 with a token set
                c.get("/nowhere", headers=auth),
                c.get("/metrics", headers=auth),
                c.get("/openapi.json", headers=auth),
                c.get("/dashboard/data", headers=auth),
                c.post("/jobs", json={"job_type": "t"}, headers=auth),
                c.post("/jobs", json={}, headers=auth),  # 422
                c.post("/jobs", content=b"x", headers={"Content-Type": "text/plain", **auth}),
                c.post("/jobs", json={"job_type": "t"}, headers={"Origin": "http://x", **auth}),
                c.get("/jobs", headers={"Host": "evil.example", **auth}),
            ]
            for r in answers:
                assert r.headers.get("x-content-type-options") == "nosniff", (
                    r.request.method,
                    r.request.url,
                    r.status_code,
                )
                if r.headers["content-type"].startswith("text/html"):
                    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def frame_page(target: str) -> str:
    return f"""<!doctype html><html><body>
<iframe id="victim" src="{target}/" width="800" height="600"></iframe>
</body></html>"""


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no token", "token"])
def test_another_origin_cannot_frame_the_dashboard(
    engine: Engine, browser: Browser, token: str | None
) -> None:
    store_types(engine, job_type("t"))
    with running_api(engine, token=token) as base, other_origin(frame_page(base)) as port:
        context = browser.new_context()
        page = context.new_page()
        statuses: list[int] = []
        page.on(
            "response",
            lambda r: statuses.append(r.status) if r.url.rstrip("/") == base else None,
        )
        page.goto(f"http://localhost:{port}/")
        wait_for(lambda: statuses, timeout=10, what="the framed page to be answered")
        page.wait_for_timeout(500)
        (frame,) = [f for f in page.frames if f != page.main_frame]
        # Blocked: the frame holds the browser's error page, never the dashboard.
        assert frame.query_selector("#login") is None
        assert frame.query_selector("#view") is None
        assert not frame.url.startswith(base)
        context.close()
